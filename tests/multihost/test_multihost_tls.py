"""The multi-host rig with TLS on every channel: a host lost mid-trial, the trial resumes on another."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rig_support import lose_host_and_resume, write_rig_model

from support.netns import Rig, multihost_rig, unavailable_reason

pytestmark = pytest.mark.integration

_REASON = unavailable_reason()
if _REASON is not None:
    pytest.skip(_REASON, allow_module_level=True)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("rig-tls")
    with multihost_rig(base / "hosts", block=2, agents=2, slots=1, tls_dir=base / "pki") as r:
        yield r


def test_with_tls_a_lost_host_s_trial_resumes_on_the_other_from_its_checkpoint(rig: Rig, tmp_path) -> None:
    try:
        lose_host_and_resume(rig, write_rig_model(tmp_path / "rig_model"))
    except BaseException:
        print(rig.logs())
        raise
