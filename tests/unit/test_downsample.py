"""A downsampled curve draws what the full one shows: first, last, min and max points."""

import json
import math

from pedl import downsample


def _rows(values: list[dict[str, float]]) -> list[str]:
    return [json.dumps(v) for v in values]


def test_a_short_curve_is_sent_whole() -> None:
    rows = _rows([{"loss": float(i)} for i in range(50)])
    assert downsample.keep(rows, 200) == list(range(50))


def test_a_long_curve_keeps_first_last_min_and_max_of_every_metric() -> None:
    values = [
        {"loss": math.sin(i / 37) + (5 if i == 4321 else 0), "acc": math.cos(i / 11)} for i in range(10_000)
    ]
    values[777]["acc"] = -9.0
    kept = downsample.keep(_rows(values), 200)
    assert len(kept) <= 200
    assert kept == sorted(set(kept))
    assert kept[0] == 0 and kept[-1] == 9_999
    for name in ("loss", "acc"):
        series = [v[name] for v in values]
        assert min(series) in [series[i] for i in kept]
        assert max(series) in [series[i] for i in kept]
    assert 4321 in kept and 777 in kept


def test_rows_without_numbers_still_keep_the_ends() -> None:
    rows = ['{"note": "x"}', "not json", *_rows([{"loss": 1.0}] * 500), '{"loss": NaN}']
    kept = downsample.keep(rows, 20)
    assert kept[0] == 0 and kept[-1] == len(rows) - 1
    assert len(kept) <= 20


def test_many_metrics_in_a_small_bound_stay_within_it() -> None:
    rows = _rows([{f"m{k}": (i * (k + 1)) % 17 for k in range(12)} for i in range(300)])
    for bound in (2, 3, 5, 20):
        kept = downsample.keep(rows, bound)
        assert len(kept) <= bound and kept[0] == 0 and kept[-1] == 299


def test_the_web_ui_refuses_a_bad_bound_or_trial_list_with_a_400() -> None:
    import pytest

    from pedl_webui import pages
    from pedl_webui.gateway import GatewayError

    assert pages._max_points(None) == downsample.MAX_POINTS and pages._max_points("20") == 20
    assert pages._trial_ids("3,5") == [3, 5] and pages._trial_ids(None) == []
    for bad in ("1", "201", "x", "-3"):
        with pytest.raises(GatewayError, match="max_points must be 2 to 200") as refused:
            pages._max_points(bad)
        assert refused.value.status == 400
    for bad_ids in ("3,,5", "a", "0", "-1"):
        with pytest.raises(GatewayError, match="trials must be trial ids"):
            pages._trial_ids(bad_ids)
