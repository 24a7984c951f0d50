"""`POST /v1/planner/adapt`: the planner adapted to the loaded KG in the background, as
`talent train planner --self` (a child process; progress; one at a time; cancel keeps the
matcher in place)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from api_helpers import auth

from talent_core.planning.self_train import SELF

pytestmark = pytest.mark.slow  # a training run of a minute or two


def _wait(client, job_id: str, headers: dict, deadline_s: float = 600) -> dict:
    end = time.monotonic() + deadline_s
    seen = set()
    while time.monotonic() < end:
        job = client.get(f"/v1/planner/adapt/{job_id}", headers=headers).json()
        seen.add(job["progress"]["stage"])
        if job["status"] != "running":
            job["stages_seen"] = sorted(seen)
            return job
        time.sleep(0.2)
    raise AssertionError(f"the adaptation did not end in {deadline_s} s: {job}")


def test_adapt_the_planner_over_http(client, api_env, api_keys):
    own = Path(api_env["TALENT_DATA_DIR"]) / "matcher"
    r, w = auth(api_keys["read"]), auth(api_keys["write"])
    try:
        assert client.post("/v1/planner/adapt", headers=r, json={}).status_code == 403
        bad = client.post("/v1/planner/adapt", headers=w, json={"anchors": 1})
        assert bad.status_code == 422
        started = client.post("/v1/planner/adapt", headers=w, json={"anchors": 10})
        assert started.status_code == 202, started.text
        job = started.json()
        assert job["status"] == "running" and job["matcher"] == str(own)
        again = client.post("/v1/planner/adapt", headers=w, json={"anchors": 10})
        assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
        done = _wait(client, job["id"], r)
        assert done["status"] == "done", done
        assert done["progress"]["stage"] == "fit"
        assert done["progress"]["done"] == done["progress"]["total"] > 0
        res = done["result"]
        assert res["trained_on"]["self"] is True and res["trained_on"]["anchors"] == 10
        assert res["training"]["questions_s"] >= 0 and res["validation"]["questions"] >= 1
        meta = json.loads((own / "matcher.json").read_text())
        assert (own / meta["lora"]).is_file() and meta["name"] == "self"
        assert client.get("/v1/planner/adapt/nope", headers=r).status_code == 404

        # cancelled: the child stops, the matcher in place stays as it was (no anchors
        # given: --self's default, one setting for the CLI, the API and the Load page)
        before = (own / "matcher.json").read_bytes()
        job = client.post("/v1/planner/adapt", headers=w, json={}).json()
        assert job["anchors"] == SELF.anchors
        out = client.delete(f"/v1/planner/adapt/{job['id']}", headers=w).json()
        assert out["status"] == "cancelled"
        assert (own / "matcher.json").read_bytes() == before
        # and the next one may start at once (its lock went with the cancelled child)
        job = client.post("/v1/planner/adapt", headers=w, json={"anchors": 10})
        assert job.status_code == 202, job.text
        client.delete(f"/v1/planner/adapt/{job.json()['id']}", headers=w)
    finally:
        shutil.rmtree(own, ignore_errors=True)
