"""``trainleak.assess`` on ORL face classifiers (seeds 3 and 8): what a user auditing their own
face classifier would get.

Loads (or trains and caches, as the ``model-inversion-adaptive`` benchmark does) the ORL split,
the adversary's VAE prior on the 20 public identities and the seed-0 targets, then assesses each
target as a user would: the release, the prior as the adversary's knowledge, the 160 private
training faces with their labels as the reference set, default attack settings. Prints one line
per target: clean accuracy, the card's level, and per attack the identities recovered, the
chance quantile they are compared with, and the evaluator's Acc@1.

Usage:
    TRAINLEAK_DATA=../shared/data python benchmarks/assess_orl.py [--targets standard negls]
"""

from __future__ import annotations

import argparse
import json
import time

from trainleak.audit.assess import assess
from trainleak.audit.assess_scoring import ReferenceSet
from trainleak.experiments._inversion_common import setup
from trainleak.experiments.model_inversion_claims import InversionConfig
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.inversion_targets import recipe, train_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=["standard", "negls"])
    parser.add_argument("--seed", type=int, default=0, help="the assessment's seed")
    args = parser.parse_args()
    cfg = InversionConfig(dataset="orl", dlib=False)
    s = setup(cfg)
    know = Knowledge(generative_prior=s.prior)
    ref = ReferenceSet(*s.task.private)
    for name in args.targets:
        target = train_target(
            s.task, recipe(name, s.task, cfg.target_steps, flip=True), cfg.seed, s.cache
        )
        t0 = time.time()
        a = assess(target.release, know, private=ref, seed=args.seed)
        runs = {
            r.name: {
                "recovered": r.scored.finding.recovered,
                "chance_quantile": r.scored.finding.baseline_recovered,
                "acc1": r.scored.finding.quality,
                "random_prior_acc1": r.scored.metrics.get("random prior samples acc1"),
            }
            for r in a.runs
            if r.scored is not None
        }
        line = {"target": name, "clean": target.clean_accuracy, "level": a.card.level}
        print(json.dumps(line | {"seconds": round(time.time() - t0, 1), "attacks": runs}))


if __name__ == "__main__":
    main()
