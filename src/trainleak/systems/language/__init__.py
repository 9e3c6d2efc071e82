"""Language-model targets with known membership: a public base model and its release fine-tuned
on member texts, with the member / non-member split recorded."""

from trainleak.systems.language.targets import (
    MembershipSplit,
    TargetSettings,
    build_target,
    candidate_windows,
)

__all__ = ["MembershipSplit", "TargetSettings", "build_target", "candidate_windows"]
