"""The one training loop, shared by every model.

It owns data order (:class:`EpochBatcher`), optimisers' learning-rate schedules, logging,
sample grids, atomic checkpoints, the divergence guard and RNG state; the model's
``training_step`` owns the update itself.
"""

from __future__ import annotations

import math
import signal
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from shortrun.data.base import LoadedData
from shortrun.data.registry import load_data
from shortrun.errors import ConfigError, DivergenceError, MissingExtraError, TrainingInterrupted
from shortrun.models.base import Model, OptimOptions
from shortrun.models.rbm_sgd import lr_decay
from shortrun.models.registry import build_model
from shortrun.speed import engine as routes
from shortrun.speed import policy as route_policy
from shortrun.speed.layout import settle_layouts
from shortrun.train import checkpoint as ckpt
from shortrun.train import distributed as dist
from shortrun.train.batcher import EpochBatcher, gather_rows
from shortrun.train.config import Config, save_config
from shortrun.train.device import check_precision, resolve_device
from shortrun.train.logger import MetricsLogger, RunningMean
from shortrun.train.own_data import adopt_own_data, write_own_data
from shortrun.train.progress import ProgressLines, metric_rows
from shortrun.train.provenance import record_provenance, record_routes
from shortrun.train.recovery import Recovery
from shortrun.train.rundir import CONFIG, LAST, has_checkpoint, prepare_new
from shortrun.train.stopping import StopSignals
from shortrun.train.threads import ThreadsForTheWork


@dataclass
class TrainResult:
    run_dir: Path | None
    step: int
    metrics: dict[str, float]


def configure_torch(cfg: Config) -> None:
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    if route_policy.use(cfg.train.routes):
        routes.forget()


def check_finite(metrics: dict[str, float], bound: float, step: int, run_dir: Path | None,
                 last_good: int | None) -> None:
    """The divergence guard: NaN/inf anywhere, or an energy past ``train.energy_bound``."""
    bad = None
    for key, value in metrics.items():
        if not math.isfinite(value):
            bad = f"{key} became {value}"
            break
        if key.startswith("energy") and abs(value) > bound:
            bad = f"{key} reached {value:.4g}, past train.energy_bound={bound:g}"
            break
    if bad is None:
        return
    where = (f"the last good checkpoint is {run_dir / LAST} (step {last_good}), left intact"
             if last_good is not None else "no checkpoint was written before it")
    raise DivergenceError(f"training diverged at step {step}: {bad}; {where}. Try a smaller "
                          "train.lr or step size, train.grad_clip, or model.energy_reg")


class Trainer:
    """``Trainer(cfg, run_dir)`` builds the model and data the config names; ``data=`` and
    ``model=`` hand it ones built in Python instead (the model is bound to the data's info,
    moved to ``train.device``, and gets its optimisers from ``cfg.train``). ``run_dir=None``
    trains in memory (``shortrun.fit`` without a folder): no file is written, no picture drawn,
    and the logged metrics stay in ``self.logger.rows``."""

    def __init__(self, cfg: Config, run_dir: Path | None, resume: bool = False,
                 data: LoadedData | None = None, model: Model | None = None) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        if resume and self.run_dir is None:
            raise ConfigError("Trainer: resume needs the run directory to resume from")
        if data is not None and self.run_dir is not None:
            # data from Python: the run records it, not cfg.data's dataset
            cfg = adopt_own_data(cfg, data, self.run_dir)
        self.cfg = cfg
        configure_torch(cfg)
        self.device = resolve_device(cfg.train.device)
        check_precision(cfg.train.precision, self.device)
        self.dist = dist.init_from_env(cfg.train.device)
        self.data = data if data is not None else load_data(cfg.data)
        self.batcher = EpochBatcher(len(self.data.train), cfg.train.batch_size, cfg.train.seed,
                                    rank=self.dist.rank, world=self.dist.world)
        t = cfg.train
        spe = self.batcher.steps_per_epoch
        self.total_steps = t.steps if t.steps is not None else t.epochs * spe
        torch.manual_seed(cfg.train.seed)
        if model is None:
            model = build_model(cfg, self.data.info)
        else:
            model.bind(self.data.info)
            model.sample_steps = cfg.sample.steps
        model.reference_data = self.data
        self.model: Model = model.to(self.device)
        with self.autocast():  # where the first step's chains run: a layout before them
            settle_layouts(self.model, t.batch_size)
        if self.dist.enabled:
            # every rank runs its own chains: a distinct random stream per rank
            torch.manual_seed(cfg.train.seed + 7919 * self.dist.rank)
        if t.compile:
            self.model.compile_networks(t.compile_backend)
        self.optimizers = self.model.configure_training(OptimOptions.from_train(t))
        if self.dist.enabled:
            for opt in self.optimizers.values():
                dist.average_gradients_before_step(opt, self.dist.world)
        self.schedulers = {k: lr_decay(o, t.lr_decay) for k, o in self.optimizers.items()}
        self.step = 0
        self.last_good: int | None = None
        self.recovery = Recovery(t.recover, t.recover_lr_factor)
        start_over = resume and not has_checkpoint(self.run_dir) \
            and (self.run_dir / CONFIG).is_file()
        on_disk = self.dist.is_main and self.run_dir is not None
        if start_over:  # stopped before its first checkpoint: nothing to resume, start again
            resume = False
            if self.dist.is_main:
                print(f"{self.run_dir} has no checkpoint yet: starting it over from step 0 "
                      "with its saved config", file=sys.stderr)
        if resume:
            self._restore()
        else:
            if on_disk:
                prepare_new(self.run_dir, start_over=start_over)
                write_own_data(cfg, self.data, self.run_dir)
                save_config(cfg, self.run_dir / CONFIG)
            self.model.on_train_start(self.data)
            if self.dist.enabled:
                # rank 0's parameters everywhere, after the data-dependent init (which runs
                # under each rank's own seed); a resumed run loads them from the checkpoint
                dist.broadcast_parameters(self.model)
        if on_disk:
            record_provenance(self.run_dir, self.step, cfg.train.device, resumed=resume)
        self.logger = MetricsLogger(self.run_dir, enabled=self.dist.is_main,
                                    purge_step=self.step + 1 if resume else None)
        if resume:
            self.logger.truncate_after(self.step)

    # ------------------------------------------------------------------ checkpoints
    def state(self) -> dict:
        return {
            "model_name": self.cfg.model.name,
            "step": self.step,
            "data_info": self.data.info.to_dict(),
            "model": self.model.state_dict(),
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
            "rng": ckpt.rng_state(),
            "config": self.cfg.to_dict(),
            # networks the user passed in: `shortrun.load` asks for them back by name
            "user_networks": list(self.model.user_networks),
        }

    def save(self) -> None:
        """Rank 0 writes; with several ranks every rank's chains and RNG go in as shards."""
        shard = {"buffers": dict(self.model.named_buffers()), "rng": ckpt.rng_state()}
        shards = dist.gather_objects(shard, self.dist)
        if self.dist.is_main:
            state = self.state()
            state["world_size"] = self.dist.world
            if self.dist.enabled:
                state["shards"] = shards
            ckpt.save_checkpoint(state, self.run_dir / LAST)
        self.last_good = self.step

    def _restore(self) -> None:
        state = ckpt.load_checkpoint(self.run_dir / LAST, self.cfg.model.name)
        self.model.load_state_dict(state["model"])
        for k, o in self.optimizers.items():
            o.load_state_dict(state["optimizers"][k])
        for k, s in self.schedulers.items():
            s.load_state_dict(state["schedulers"][k])
        ckpt.set_rng_state(state["rng"])
        saved_world = int(state.get("world_size", 1))
        dist.check_world(saved_world, self.dist)
        if "shards" in state and self.dist.enabled:
            shard = state["shards"][self.dist.rank]
            self.model.load_state_dict({**self.model.state_dict(), **shard["buffers"]})
            ckpt.set_rng_state(shard["rng"])
        self.step = self.last_good = int(state["step"])
        if self.dist.is_main:
            save_config(self.cfg, self.run_dir / CONFIG)

    # ------------------------------------------------------------------ loop
    def draw(self) -> None:
        path = self.run_dir / "samples" / f"step_{self.step:07d}.png"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.sample.seed + self.step)
            self.model.eval()
            try:
                self.model.draw(path, self.cfg.sample.n)
            except MissingExtraError as exc:  # pictures are a by-product; the run goes on
                warnings.warn(f"{exc}; training goes on without pictures", stacklevel=2)
            self.model.train()

    def autocast(self):
        """bf16 autocast for ``train.precision: bf16``; parameters and chains stay fp32."""
        enabled = self.cfg.train.precision == "bf16"
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=enabled)

    def fit(self) -> TrainResult:
        t = self.cfg.train
        spe = self.batcher.steps_per_epoch
        window, last_logged = RunningMean(), {}
        if self.step >= self.total_steps:
            return self._already_finished()
        show = t.progress and self.dist.is_main
        bar = tqdm(total=self.total_steps, initial=self.step, disable=not show or None,
                   desc=self.cfg.recipe or self.cfg.model.name, dynamic_ncols=True)
        # tqdm draws only on a terminal; elsewhere (nohup, CI, a scheduler) a line now and then
        progress = ProgressLines(self.step, t.progress_every_s) if show and bar.disable else None
        self.model.train()
        in_step = False
        stop = StopSignals(enabled=not self.dist.enabled)
        threads = ThreadsForTheWork(t.threads)
        bf16 = t.precision == "bf16"
        try:
            stop.install()
            self.recovery.before_loop(self)
            while self.step < self.total_steps:
                in_step = True
                idx = self.batcher.indices(self.step)
                batch = gather_rows(self.data.train, idx).to(self.device, non_blocking=True)
                if self.model.supervised:  # e.g. the feature classifier: (images, labels)
                    batch = (batch, gather_rows(self.data.train_labels, idx).to(self.device))
                if bf16:
                    with self.autocast():
                        metrics = self.model.training_step(batch, self.step, self.optimizers)
                else:  # an autocast context costs ~10 µs a step even when disabled
                    metrics = self.model.training_step(batch, self.step, self.optimizers)
                metrics = dist.mean_metrics(metrics, self.dist)
                if not self.recovery.guard(self, check_finite, metrics, t.energy_bound,
                                           self.step + 1, self.run_dir, self.last_good):
                    window, in_step, bar.n = RunningMean(), False, self.step  # rolled back
                    continue
                window.add(metrics)
                threads.after_first_step()
                self.step += 1
                in_step = False
                bar.update(1)
                if self.step % spe == 0:
                    for s in self.schedulers.values():
                        s.step()
                done = self.step == self.total_steps
                if self.step % t.log_every == 0 or done:
                    last_logged = window.pop()
                    lr = {f"lr_{k}": o.param_groups[0]["lr"] for k, o in self.optimizers.items()}
                    self.logger.log(self.step, last_logged, epoch=self.step / spe, **lr)
                    bar.set_postfix({k: f"{v:.3g}" for k, v in list(last_logged.items())[:4]})
                if self.run_dir is not None:  # in memory: no pictures, no checkpoints
                    if (self.step % t.sample_every == 0 or done) and self.dist.is_main:
                        self.draw()
                    if self.step % t.ckpt_every == 0 or done:
                        self.save()
                if progress is not None:
                    progress.maybe_print(self.step, self.total_steps, last_logged)
                if stop.signum is not None and not done:
                    self._stop_on_signal(stop.signum)
            if self.dist.enabled:
                synced = dist.parameters_identical(self.model, self.dist)
                self.logger.log(self.step, {"params_identical_across_ranks": float(synced)},
                                world_size=self.dist.world)
        except (DivergenceError, TrainingInterrupted):
            raise  # a diverged state is never saved over a good one; a stop already saved
        except BaseException as exc:
            self._save_after_error(exc, in_step)
            raise
        finally:
            if self.dist.is_main and self.run_dir is not None:
                record_routes(self.run_dir, route_policy.mode(), torch.get_num_threads())
            threads.restore()
            stop.restore()
            bar.close()
            self.logger.close()
        return TrainResult(self.run_dir, self.step, last_logged)

    # ------------------------------------------------------------------ stopping early
    def _resume_hint(self) -> str:
        return f"resume with shortrun train --resume {self.run_dir}"

    def _stop_on_signal(self, signum: int) -> None:
        """Checkpoint the step just finished (unless it was just saved), then stop."""
        by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        if self.run_dir is None:
            raise TrainingInterrupted(f"interrupted{by} at step {self.step}; trained in memory "
                                      "(no run_dir): the model holds that step's state",
                                      exit_code=128 + signum)
        if self.last_good != self.step:
            self.save()
        raise TrainingInterrupted(f"interrupted{by} at step {self.step}; checkpoint "
                                  f"saved: {self._resume_hint()}", exit_code=128 + signum)

    def _state_is_finite(self) -> bool:
        tensors = [*self.model.parameters(), *self.model.buffers()]
        return all(bool(torch.isfinite(x).all()) for x in tensors if x.is_floating_point())

    def _save_after_error(self, exc: BaseException, in_step: bool) -> None:
        """Lightning-style on-exception checkpoint, never of a non-finite state.

        Raised between steps, the state is exactly that of ``self.step`` steps; raised inside
        a step, the model may be part-way through it (chains advanced, some optimizers
        stepped), so the checkpoint is labelled with the last whole step and the message says
        the resumed run will not be bit-identical. A second Ctrl-C, or several ranks (which
        would block in the save's gather), save nothing.
        """
        if self.run_dir is None:  # in memory: the model object itself is what survives
            return
        if self.dist.enabled or not self.dist.is_main or isinstance(exc, KeyboardInterrupt):
            where = (f"the last checkpoint (step {self.last_good}) is intact"
                     if self.last_good is not None else "no checkpoint was written")
            if self.dist.is_main:
                print(f"shortrun: stopped during step {self.step + 1}; nothing saved now, "
                      f"{where}", file=sys.stderr)
            return
        if self.last_good == self.step:  # an exact checkpoint of this step exists: keep it
            print(f"shortrun: {type(exc).__name__} at step {self.step + 1}; the checkpoint of "
                  f"step {self.step} is intact: {self._resume_hint()}", file=sys.stderr)
            return
        if not self._state_is_finite():
            print(f"shortrun: {type(exc).__name__} during step {self.step + 1} with a "
                  "non-finite model state: not saved", file=sys.stderr)
            return
        try:
            self.save()
        except Exception as save_exc:  # e.g. the disk is full: report both, keep the first
            print(f"shortrun: could not save a checkpoint after {type(exc).__name__} "
                  f"({type(save_exc).__name__}: {save_exc})", file=sys.stderr)
            return
        caveat = (" (taken inside the failed step: the resumed run continues from it but is "
                  "not bit-identical to an uninterrupted one)" if in_step else "")
        print(f"shortrun: {type(exc).__name__} at step {self.step + 1}; checkpoint of step "
              f"{self.step} saved{caveat}: {self._resume_hint()}", file=sys.stderr)

    def _already_finished(self) -> TrainResult:
        rows = [r for r in metric_rows(self.run_dir) if r.get("step") == self.step]
        shown = {k: v for k, v in (rows[-1] if rows else {}).items()
                 if k not in ("step", "epoch", "time") and not k.startswith("lr_")
                 and isinstance(v, (int, float))}
        if self.dist.is_main:
            print(f"{self.run_dir} already finished at step {self.step} (train.steps gives "
                  f"{self.total_steps}); raise train.steps to continue, e.g. --set "
                  f"train.steps={2 * self.step}", file=sys.stderr)
        self.logger.close()
        return TrainResult(self.run_dir, self.step, shown)

    def close(self) -> None:
        dist.shutdown(self.dist)
