"""One setting of the ``distillation-leakage`` utility rows, measured alone: distil the digits
default private split (or, with ``--dataset``, the MNIST / CIFAR-10 benchmark's) with one
algorithm and architecture (seed ``--first-seed`` + s, 1000 by default), train the
experiment's 4 fresh networks on each set and 6 random real subsets of the same size the same
way (300 steps, the learning rate chosen from ``--eval-lr`` on the private data by each side;
DSA on both sides with ``--eval-augment``), print one JSON line with the accuracies, the
one-sided 95% Welch bound on the gain (per network, and under ``by_set`` with each set's mean
as the unit, the experiment's claim's reading), MTT's learned and experts' rates and the
distillation thread CPU time.

    python benchmarks/distillation_setting.py mtt lenet --init real --seeds 2 \\
        --set lr_img=0.003

With ``--seeds 1`` the numbers are the default run's row for that setting.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

from trainleak.scenarios.distillation import candidate_specs, split_task
from trainleak.scenarios.distillation_protocol import setting_summary
from trainleak.systems.distillation import (
    ALGORITHMS,
    EvalProtocol,
    distill,
    random_subset_accuracies,
    set_accuracies,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("algorithm", choices=sorted(ALGORITHMS))
    parser.add_argument("architecture", choices=["mlp", "convnet", "lenet", "resnet"])
    parser.add_argument("--init", default="real", choices=["real", "noise"])
    parser.add_argument(
        "--dataset",
        default="digits",
        choices=["digits", "mnist", "cifar10"],
        help="digits: the default run's split (800 / 800 / 197); mnist, cifar10: the "
        "benchmark's (1000 private / 1000 auxiliary / 500 held-out)",
    )
    parser.add_argument("--ipc", type=int, default=10, help="images per class")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument(
        "--first-seed", type=int, default=1000, help="distillation seed of the first set"
    )
    parser.add_argument("--eval-augment", action="store_true")
    parser.add_argument(
        "--eval-lr",
        type=float,
        nargs="+",
        default=[0.01, 0.05],
        help="SGD lr, or a grid each side chooses from on the private data (the default run's)",
    )
    parser.add_argument("--set", nargs="*", default=[], help="config overrides key=json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    extra = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    sizes = (800, 800, 197) if args.dataset == "digits" else (1000, 1000, 500)
    task = split_task(args.dataset, *sizes, 0)
    spec = candidate_specs([args.architecture], task.input_shape, task.num_classes)
    spec_ = spec[args.architecture]
    test = (torch.cat([task.aux[0], task.holdout[0]]), torch.cat([task.aux[1], task.holdout[1]]))
    cfg = ALGORITHMS[args.algorithm](ipc=args.ipc, init=args.init, **extra)
    protocol = EvalProtocol.from_rates(args.eval_lr, steps=300, models=4, augment=args.eval_augment)
    accs: list[float] = []
    set_means: list[float] = []
    lrs, expert_lrs, cpu = [], [], 0.0
    for s in range(args.seeds):
        t0 = time.thread_time()
        run = distill(*task.private, task.num_classes, spec_, cfg, seed=args.first_seed + s)
        cpu += time.thread_time() - t0
        lrs.append(run.release.lr)
        expert_lrs.append(run.trace[0].get("expert_lr") if run.trace else None)
        got = set_accuracies(run.release, spec_, test, protocol, seed=s, select=task.private)
        accs += got
        set_means.append(sum(got) / len(got))
    rand_protocol = dataclasses.replace(protocol, models=6)
    rand = random_subset_accuracies(
        *task.private, args.ipc, spec_, test, rand_protocol, select=task.private
    )
    setting = f"{args.dataset}/{args.algorithm}/{args.architecture}/ipc{args.ipc}/{args.init}"
    out = {"setting": setting, "overrides": extra}
    out |= {"learned_lr": lrs, "expert_lr": expert_lrs, "distil_thread_cpu_s": cpu / args.seeds}
    out |= setting_summary(accs, rand) | {"distilled_accs": accs, "random_accs": rand}
    # the experiment's claim takes a set (its networks' mean) as the unit: with several
    # seeds, that reading beside the per-network one above
    out |= {"set_means": set_means, "by_set": setting_summary(set_means, rand)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
