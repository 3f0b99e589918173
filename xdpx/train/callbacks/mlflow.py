"""The ``mlflow`` callback: the run's options, its evaluations and its run directory in MLflow.

``callbacks: [mlflow]`` logs the options as params at the start, every valid.log.tsv row as metrics (at
the row's step), and the run directory's files as artifacts at the end. The store is
``mlflow_tracking_uri``, else the MLFLOW_TRACKING_URI environment variable, else a SQLite store inside
the run directory (``sqlite:///<save_dir>/mlflow.db``, artifacts in ``<save_dir>/mlflow-artifacts``):
``mlflow ui --backend-store-uri sqlite:///<save_dir>/mlflow.db`` shows it. A resumed run continues the
same MLflow run (its id is kept in state.pt, or found by the run directory's tag when the run was killed
before its first save); evaluations that a resume redoes are not logged twice.
"""

from __future__ import annotations

import os
import time
from typing import Any

from xdpx import io
from xdpx.config.options import Option, Rule
from xdpx.io.credentials import redact, unmask
from xdpx.train.callbacks import Callback, RunInfo, callbacks
from xdpx.utils.optional import installed, missing_message, require

SAVE_DIR_TAG = "xdpx.save_dir"
STORE_FILE, ARTIFACT_DIR = "mlflow.db", "mlflow-artifacts"
# never sent as params: the tracking URI may hold a password (use MLFLOW_TRACKING_USERNAME/PASSWORD); every
# other param, tag and artifact holds credentials masked (xdpx.io.redact; args.py, log.txt are written so)
UNLOGGED_OPTIONS = ("mlflow_tracking_uri",)
MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
PARAMS_PER_BATCH = 100


def tracking_uri(args: Any) -> str:
    """The store a run logs to: the option, else MLFLOW_TRACKING_URI, else SQLite in the run directory."""
    if args.mlflow_tracking_uri:
        # read back masked (an x-tune trial's config): the password comes from x-tune or the environment
        return unmask(args.mlflow_tracking_uri)
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return "sqlite:///" + os.path.abspath(os.path.join(args.save_dir, STORE_FILE))


@callbacks.register("mlflow")
class MlflowCallback(Callback):
    """Experiment tracking in MLflow (docs/train.md, MLflow)."""

    options = [
        Option("mlflow_tracking_uri", str, default=None,
               doc="MLflow tracking URI: a server (http://127.0.0.1:5000) or a store (sqlite:///path.db); null: "
                   "MLFLOW_TRACKING_URI, else sqlite:///<save_dir>/mlflow.db. Put credentials in "
                   "MLFLOW_TRACKING_USERNAME/PASSWORD, not in the URI"),
        Option("mlflow_experiment", str, default="xdpx", doc="MLflow experiment name (created when missing)"),
        Option("mlflow_run_name", str, default=None, doc="MLflow run name (null: the save_dir folder name)"),
        Option("mlflow_log_weights", bool, default=False,
               doc="also upload the weights checkpoints kept at the end (checkpoint-<step>.pt) as artifacts"),
        Rule(lambda a: installed("mlflow"), missing_message("mlflow", "callbacks: [mlflow]"),
             keys=("callbacks",)),
        Rule(lambda a: a.mlflow_tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "://" not in str(a.save_dir),
             "callbacks: [mlflow] keeps its default store in a local save_dir: set mlflow_tracking_uri for a "
             "remote save_dir", keys=("mlflow_tracking_uri", "save_dir")),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.run_id: str | None = None
        self.client: Any = None
        self.logged_up_to = -1  # the last step whose evaluation is in MLflow already

    # ---- state (the run id, so a resume continues the same MLflow run) ----
    def state_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.run_id = state.get("run_id")

    # ---- hooks ----
    def on_train_start(self, run: RunInfo) -> None:
        if not run.is_main:
            return
        MlflowClient = require("mlflow.tracking", "callbacks: [mlflow]").MlflowClient  # noqa: N806

        a = self.args
        self.client = client = MlflowClient(tracking_uri(a))
        save_dir = os.path.abspath(run.save_dir) if not io.is_remote(run.save_dir) else run.save_dir
        shown = redact(save_dir)  # the tag and run name the store keeps
        experiment = client.get_experiment_by_name(a.mlflow_experiment)
        if experiment is None:
            location = None
            if not (a.mlflow_tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")):
                location = "file://" + os.path.join(save_dir, ARTIFACT_DIR)
            experiment_id = client.create_experiment(a.mlflow_experiment, artifact_location=location)
        else:
            experiment_id = experiment.experiment_id
        if self.run_id is None and a.resume:  # killed before the first save: find the run by its folder
            found = client.search_runs([experiment_id], filter_string=f"tags.`{SAVE_DIR_TAG}` = '{shown}'",
                                       order_by=["attributes.start_time DESC"], max_results=1)
            self.run_id = found[0].info.run_id if found else None
        if self.run_id is None:
            created = client.create_run(experiment_id, run_name=a.mlflow_run_name or os.path.basename(shown),
                                        tags={SAVE_DIR_TAG: shown})
            self.run_id = created.info.run_id
        else:
            client.update_run(self.run_id, status="RUNNING")
            history = client.get_metric_history(self.run_id, "step")
            self.logged_up_to = max((int(m.value) for m in history), default=-1)
        self._log_params(run)

    def _log_params(self, run: RunInfo) -> None:
        from mlflow.entities import Param  # lazy: optional mlflow

        logged = self.client.get_run(self.run_id).data.params  # params are immutable: log the new ones only
        values = {name: value for name, value in run.args.items() if name not in UNLOGGED_OPTIONS}
        params = [Param(name, str(redact(value))[:MAX_PARAM_LENGTH]) for name, value in sorted(values.items())
                  if name not in logged]
        for start in range(0, len(params), PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=params[start: start + PARAMS_PER_BATCH])

    def on_evaluation(self, run: RunInfo, row: dict[str, Any]) -> None:
        if self.client is None or row["step"] <= self.logged_up_to:
            return
        from mlflow.entities import Metric  # lazy: optional mlflow

        now = int(time.time() * 1000)
        metrics = [Metric(name, float(value), now, int(row["step"])) for name, value in row.items()
                   if isinstance(value, (int, float)) and not isinstance(value, bool)]
        self.client.log_batch(self.run_id, metrics=metrics)
        self.logged_up_to = int(row["step"])

    def on_train_end(self, run: RunInfo, status: str) -> None:
        if self.client is None:
            return
        self.client.set_tag(self.run_id, "xdpx.status", status)
        for path, folder in self._artifacts(run.save_dir):
            self.client.log_artifact(self.run_id, path, artifact_path=folder)
        self.client.set_terminated(self.run_id, "FINISHED")

    def _artifacts(self, save_dir: str) -> list[tuple[str, str]]:
        """(local file, artifact folder) of the run directory: not the MLflow store, not the training state,
        weights only with mlflow_log_weights."""
        if io.is_remote(save_dir):
            return []
        found = []
        for directory, subdirs, files in os.walk(save_dir):
            subdirs[:] = sorted(d for d in subdirs if d != ARTIFACT_DIR)
            relative = os.path.relpath(directory, save_dir)
            folder = "run" if relative == "." else os.path.join("run", relative)
            for name in sorted(files):
                if name.startswith((STORE_FILE, "state", ".")):
                    continue
                if name.endswith(".pt") and not self.args.mlflow_log_weights:
                    continue
                found.append((os.path.join(directory, name), folder))
        return found
