"""The Load page's "Planner for this KG" section: which matcher plans on this store, and
the planner adapted to it in the background (`talent train planner --self`: here through
`training.self_job`, or the API server's `POST /v1/planner/adapt`), with progress and
Cancel. Every process on the data dir plans with the new matcher from its next question."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import streamlit as st

from talent_core.api.client import ApiClient
from talent_core.config import get_settings
from talent_core.errors import ApiClientError, TalentError
from talent_core.planning.self_train import SELF
from talent_core.ui.safe import error_line, plain

ADAPT = "_adapt_job"  # the session state's running adaptation (a SelfAdaptation, or an id)
STAGES = {"starting": "starting", "questions": "writing questions from the KG's own paths",
          "fit": "training the matcher", "rerank": "training the re-ranker"}


def _own_matcher() -> str:
    """What plans on this store, in a line."""
    from talent_core.errors import PlannerError
    from talent_core.planning.matcher import load_meta
    from talent_core.planning.plan import SELF_DIR

    own = get_settings().data_dir / SELF_DIR
    try:
        meta = load_meta(own)
    except PlannerError:
        return ("The planner reads this KG with the shipped matcher (trained on WebQSP and "
                "MetaQA questions). Adapting it writes questions from this KG's own "
                "relation paths and trains on them: no labels needed.")
    when = datetime.fromtimestamp((own / "matcher.json").stat().st_mtime, tz=UTC)
    val = (meta.get("validation") or {}).get("path_acc")
    return (f"The planner reads this KG with its own matcher, adapted {when:%Y-%m-%d %H:%M} "
            f"UTC from {meta.get('trained_on', {}).get('pairs', '?')} questions written from "
            "its paths" + (f" (path accuracy on held-back ones: {val:.2f})"
                           if isinstance(val, int | float) else "") + ".")


def _start(client: ApiClient | None, anchors: int) -> Any:
    from talent_core.training.self_job import SelfAdaptation

    if client is not None:
        return client.start_adapt(anchors)["id"]
    return SelfAdaptation(get_settings(), anchors)


def _status(client: ApiClient | None, job: Any) -> dict[str, Any]:
    return client.adapt(job) if client is not None else job.out()


def _cancel(client: ApiClient | None, job: Any) -> None:
    if client is not None:
        client.cancel_adapt(job)
    else:
        job.cancel()


def planner_view(client: ApiClient | None) -> None:
    """The section (see the module doc)."""
    st.subheader("Planner for this KG")
    if client is None:
        st.caption(plain(_own_matcher()))
    job = st.session_state.get(ADAPT)
    c1, c2 = st.columns([1, 2])
    anchors = c1.number_input("entities to write questions from", min_value=10,
                              max_value=5000, value=SELF.anchors, step=100,
                              key="adapt_anchors", help="more: more questions, a longer run "
                              f"({SELF.anchors}: 3-5 min on 2 quiet cores, up to ~15 busy)")
    if c2.button("Adapt the planner to this KG", key="adapt_start", disabled=job is not None):
        try:
            job = st.session_state[ADAPT] = _start(client, int(anchors))
        except (TalentError, ApiClientError) as e:  # one already runs (409), ...
            st.error(plain(str(e) if isinstance(e, ApiClientError) else error_line(e)))
    if job is None:
        return
    if st.button("Cancel the adaptation", key="adapt_cancel"):
        _cancel(client, job)
    bar = st.progress(0.0, text="starting")
    while True:
        try:
            out = _status(client, job)
        except ApiClientError as e:
            st.session_state.pop(ADAPT, None)
            st.error(plain(str(e)))
            return
        p = out["progress"]
        frac = p["done"] / p["total"] if p["total"] else 0.0
        step = "anchor" if p["stage"] == "questions" else "step"
        bar.progress(min(frac, 1.0), text=plain(
            f"{STAGES.get(p['stage'], p['stage'])}: {step} {p['done']:,} of {p['total']:,} · "
            f"{p['elapsed_s']:.0f} s"))
        if out["status"] != "running":
            break
        time.sleep(1.0)
    st.session_state.pop(ADAPT, None)
    if out["status"] == "done":
        res = out["result"] or {}
        val = (res.get("validation") or {}).get("path_acc")
        st.success(plain(f"Adapted in {p['elapsed_s']:.0f} s from "
                         f"{(res.get('trained_on') or {}).get('pairs', '?')} questions"
                         + (f"; path accuracy on held-back ones {val:.2f}"
                            if isinstance(val, int | float) else "")
                         + ". The next question plans with it."))
    elif out["status"] == "cancelled":
        st.info("Cancelled: the planner keeps the matcher it had.")
    else:
        st.error(plain((out.get("error") or {}).get("message") or "the adaptation failed"))
