"""W&B: a run's logger settings are checked before anything runs, and a finished run's config, metrics, tables,
figures and verdicts are logged (offline unless ``logger.mode`` says otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

from memlab.errors import ConfigError


def check_logger(lg: dict | None) -> None:
    """Before anything runs: a W&B logger node names every setting conf/logger/wandb.yaml has (no default in code)."""
    missing = [k for k in ("project", "entity", "mode", "dir") if lg and k not in lg]
    if missing:
        raise ConfigError(f"logger={lg.get('name')} lacks {', '.join(missing)} (see conf/logger/wandb.yaml)")


def log_wandb(resolved: dict, out_dir: Path, metrics: dict) -> None:
    """Log config, metrics, tables and figures to W&B (offline unless logger.mode says otherwise)."""
    import pandas as pd
    import wandb

    lg = resolved["logger"]
    os.environ.setdefault("WANDB_SILENT", "true")
    run = wandb.init(project=lg["project"], entity=lg["entity"], mode=lg["mode"],
                     dir=lg["dir"], name=f"{resolved['experiment_name']}/{resolved['run']['key']}",
                     group=resolved["experiment_name"], config={k: v for k, v in resolved.items() if k != "run"}, reinit="finish_previous")
    try:
        flat = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        run.summary.update(flat)
        run.summary.update(verdicts(metrics, out_dir))  # strings: the same verdicts as the report site
        for csv in sorted((out_dir / "tables").glob("*.csv")):
            df = pd.read_csv(csv)
            run.log({f"table/{csv.stem}": wandb.Table(dataframe=df)})
        for png in sorted((out_dir / "figures").glob("*.png")):
            run.log({f"figure/{png.stem}": wandb.Image(str(png))})
    finally:
        run.finish()


def verdicts(metrics: dict, out_dir: Path) -> dict[str, str]:
    """``verdict/<claim_id>`` → verdict string, from metrics.json (Report.save puts them there) and from
    ``tables/comparison.csv`` (the table the report site reads; it wins when both have a claim)."""
    import pandas as pd

    out = {k: v for k, v in metrics.items() if k.startswith("verdict/") and isinstance(v, str)}
    csv = out_dir / "tables" / "comparison.csv"
    if csv.exists():
        df = pd.read_csv(csv, dtype=str, keep_default_na=False)
        if {"claim_id", "verdict"} <= set(df.columns):
            out.update({f"verdict/{c}": v for c, v in zip(df["claim_id"], df["verdict"])})
    return out
