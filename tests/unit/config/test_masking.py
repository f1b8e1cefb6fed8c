"""What masking hides (and keeps) before configs and log lines are shown: secret-named keys, secret
environment variables, passwords in URLs and secret-looking query parameters."""

from __future__ import annotations

import pytest

from pedl.config.masking import MASK, mask_secrets, mask_text, mask_values, secret_values


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://user:pa55word@host/x", f"https://user:{MASK}@host/x"),
        ("postgresql://pedl:p@ss:w0rd@db:5432/pedl", f"postgresql://pedl:{MASK}@db:5432/pedl"),
        (
            "GET s3://b/k?X-Amz-Credential=AK%2F1&X-Amz-Date=2026&X-Amz-Signature=abc123",
            f"GET s3://b/k?X-Amz-Credential={MASK}&X-Amz-Date=2026&X-Amz-Signature={MASK}",
        ),
        (
            "/api?page=2&api_key=xyz&password=p&sig=1",
            f"/api?page=2&api_key={MASK}&password={MASK}&sig={MASK}",
        ),
        ("export AWS_SECRET_ACCESS_KEY=abcd1234 then", f"export AWS_SECRET_ACCESS_KEY={MASK} then"),
        ('HF_TOKEN="hf_abc" WANDB_API_KEY=w', f'HF_TOKEN="{MASK}" WANDB_API_KEY={MASK}'),
        ("db_password: hunter2", f"db_password: {MASK}"),
    ],
)
def test_secrets_in_text_are_masked(text: str, shown: str) -> None:
    assert mask_text(text) == shown
    assert mask_text(shown) == shown  # masking twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "step 120: loss=0.53 acc: 0.91 lr=0.001 at 12:30:00",
        "http://host:8080/path?page=2&batch_size=16",
        "max_tokens=5 tokenizer=bert num_keys: 3",
        "",
    ],
)
def test_ordinary_lines_stay_as_they_are(text: str) -> None:
    assert mask_text(text) == text


def test_configs_mask_keys_env_variables_and_urls_at_any_depth() -> None:
    config = {
        "checkpoint_storage": {"type": "s3", "secret_key": "K", "endpoint_url": "http://u:p@minio:9000"},
        "environment": {"environment_variables": ["A=1", "GITHUB_TOKEN=ghp_x"]},
        "data": {"urls": ["https://x:y@h/a?token=t&n=1"], "max_tokens": 7},
    }
    shown = mask_secrets(config)
    assert shown["checkpoint_storage"] == {
        "type": "s3",
        "secret_key": MASK,
        "endpoint_url": f"http://u:{MASK}@minio:9000",
    }
    assert shown["environment"]["environment_variables"] == ["A=1", f"GITHUB_TOKEN={MASK}"]
    assert shown["data"] == {"urls": [f"https://x:{MASK}@h/a?token={MASK}&n=1"], "max_tokens": 7}
    assert config["data"]["urls"] == ["https://x:y@h/a?token=t&n=1"]  # a copy: the original is untouched


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("environ({'AWS_SECRET_ACCESS_KEY': 'abc123', 'HOME': '/root'})",
         f"environ({{'AWS_SECRET_ACCESS_KEY': '{MASK}', 'HOME': '/root'}})"),
        ('{"api_key":"k-123","lr":0.1}', f'{{"api_key":"{MASK}","lr":0.1}}'),
    ],
)  # fmt: skip
def test_quoted_names_as_printed_dicts_and_json_write_them_are_masked(text: str, shown: str) -> None:
    assert mask_text(text) == shown


CONFIG = {
    "environment": {"environment_variables": ["AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI", "A=1", "LR=0.001"]},
    "checkpoint_storage": {"type": "s3", "secret_key": "s3-secret-9", "access_key": {"id": "AKIA77"}},
    "data": {"url": "https://reader:pa55word@data.example/x.tgz?token=tok-4567&v=2"},
    "hyperparameters": {
        "api_key": {"type": "const", "val": "sk-live-42"},
        "lr": {"type": "const", "val": 0.1},
    },
}


def test_a_configs_secret_values_are_found_wherever_they_sit() -> None:
    assert secret_values(CONFIG) == {
        "wJalrXUtnFEMI", "s3-secret-9", "AKIA77", "pa55word", "tok-4567", "sk-live-42",
    }  # fmt: skip
    assert secret_values({"password": "abc", "token": MASK}) == frozenset()  # too short to hunt for; a mask


def test_secret_values_are_masked_wherever_a_log_line_shows_them() -> None:
    values = secret_values(CONFIG)
    line = "key wJalrXUtnFEMI then sk-live-42, lr 0.001, const"
    assert mask_values(line, values) == f"key {MASK} then {MASK}, lr 0.001, const"
    assert mask_values("nothing to hide", values) == "nothing to hide"
