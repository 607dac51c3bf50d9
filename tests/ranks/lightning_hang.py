"""A stand-in for a Lightning job with LtdHeartbeat(timeout=...), one rank stalls.

Lightning is not needed: ltworker.callback.HeartbeatHooks is the callback's
logic, driven here through a fake trainer in the order Lightning 1.9 and 2.x
call the hooks in `fit` (fit start, sanity-check validation, train start,
epoch start, batches). Rank --hang-rank stalls in
`training_step_that_never_returns` at batch --hang-batch; the others keep
training. Everything ends by itself (exit 0) after --seconds, so a callback
that arms nothing shows as a job that succeeds.
"""
import argparse
import os
import time

from ltworker.callback import HeartbeatHooks


class FakeTrainer:
    global_step = 0


def training_step_that_never_returns(until):
    while time.monotonic() < until:
        time.sleep(0.1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--hang-rank", type=int, default=0)
    p.add_argument("--hang-batch", type=int, default=3)
    p.add_argument("--seconds", type=float, default=30)
    args = p.parse_args()
    rank = int(os.environ["RANK"])
    until = time.monotonic() + args.seconds

    hooks = HeartbeatHooks(timeout=args.timeout)  # as LtdHeartbeat(timeout=...)
    trainer, module = FakeTrainer(), None
    hooks.on_fit_start(trainer, module)
    hooks.on_validation_start(trainer, module)
    hooks.on_validation_batch_end(trainer, module, None, None, 0)
    hooks.on_validation_end(trainer, module)
    hooks.on_train_start(trainer, module)
    hooks.on_train_epoch_start(trainer, module)
    batch_idx = 0
    while time.monotonic() < until:
        hooks.on_train_batch_start(trainer, module, None, batch_idx)
        if rank == args.hang_rank and batch_idx == args.hang_batch:
            training_step_that_never_returns(until)
            break
        time.sleep(0.05)  # the training step
        trainer.global_step += 1
        hooks.on_train_batch_end(trainer, module, None, None, batch_idx)
        batch_idx += 1
    hooks.on_train_end(trainer, module)


if __name__ == "__main__":
    main()
