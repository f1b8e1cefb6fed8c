"""The PEDL authors' examples (v0.11.2 tree), taken unchanged: mnist_pytorch's search configs
(adaptive.yaml, grid.yaml...) name no `entrypoints:` beside an empty __init__.py. PEDL 0.11's
documentation requires a directory's __init__.py to expose the Trial and make_data_loaders, so
PEDL refused them too; pedl refuses them in one line that names the `entrypoints:` to add, the
one the folder's own const.yaml carries."""

from __future__ import annotations

import shutil

import pytest
import yaml
from published_trees import pedl_examples

from pedl.config import parse_experiment_config
from pedl.harness.build import load_for_config
from pedl.model_def import ModelDefinitionError

SEARCH_CONFIGS = ("adaptive.yaml", "adaptive-advanced.yaml", "grid.yaml")


@pytest.mark.parametrize("name", SEARCH_CONFIGS)
def test_a_search_config_without_entrypoints_is_refused_naming_the_entrypoints_to_add(tmp_path, name) -> None:
    folder = pedl_examples() / "mnist_pytorch"
    if not (folder / name).exists():
        pytest.skip(f"{name} is not in this tree")
    model = shutil.copytree(folder, tmp_path / "mnist_pytorch")
    parsed = parse_experiment_config((model / name).read_text())
    with pytest.raises(ModelDefinitionError) as refused:
        load_for_config(model, parsed.raw)
    message = str(refused.value)
    assert "\n" not in message and "__init__.py exposes no Trial subclass" in message
    # The folder holds two trials: const.yaml's and const-multi-output.yaml's.
    wanted = yaml.safe_load((model / "const.yaml").read_text())["entrypoints"]
    multi = yaml.safe_load((model / "const-multi-output.yaml").read_text())["entrypoints"]
    assert message.endswith(
        f"add `entrypoints: {{trial_class: <one of {wanted['trial_class']}, {multi['trial_class']}>, "
        f"data_loaders_function: {wanted['data_loaders_function']}, "
        f"download_data_function: {wanted['download_data_function']}}}` to the experiment config"
    )
