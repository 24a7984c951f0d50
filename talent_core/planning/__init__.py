"""Planning: which relation paths from its anchors a question asks for, walked in the
store; one call per question (`plan_paths`), the plan's ends joining S (`join_plan`).

`matcher` scores a question against a relation path in words (a LoRA-tuned sentence
encoder; `training.matcher` fits it), `beam` grows the anchors' own paths hop by hop
under it, `plan` is the stage, `paths` the pure path definitions, `self_train` writes
questions from a loaded store's paths."""

from talent_core.planning.plan import Plan, join_plan, plan_paths

__all__ = ["Plan", "join_plan", "plan_paths"]
