"""The benchmark report: runs of one day make one record, whichever contenders each ran."""

import json

from benchmarks.report import merge_same_day


def _case(size, runs):
    return {"size": size, "partitions": 1, "records": 10, "bytes": 10 * size, "prefill_s": 0.1, "runs": runs}


def test_contenders_run_separately_on_one_day_are_one_case_each(tmp_path):
    first = {"date": "2026-11-28", "command": "a", "total_minutes": 1.0,
             "throughput": [_case(100, {"raw loop": {"seconds": 1.0}, "mirrorflow": {"seconds": 2.0}})]}
    (tmp_path / "2026-11-28.json").write_text(json.dumps(merge_same_day(first, tmp_path)))
    second = {"date": "2026-11-28", "command": "b", "total_minutes": 2.0,
              "throughput": [_case(100, {"MM2": {"seconds": 5.0}}), _case(1000, {"MM2": {"seconds": 6.0}})]}
    merged = merge_same_day(second, tmp_path)
    assert [sorted(c["runs"]) for c in merged["throughput"]] == [["MM2", "mirrorflow", "raw loop"], ["MM2"]]
    assert merged["commands"] == ["a", "b"] and merged["total_minutes"] == 3.0
