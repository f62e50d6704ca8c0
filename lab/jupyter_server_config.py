# `make lab` passes this file (--config=lab/jupyter_server_config.py): JupyterLab for this repo.
# - saving a notebook under notebooks/ drops what running it adds (outputs, execution counts, run metadata), so the
#   tracked notebooks stay as committed (memlab.lab.pre_save_hook);
# - no news feed and no update check: nothing asks to fetch from the internet (the machine may be offline);
# - Lab's settings overrides come from lab/settings/ (the news prompt answered "no").
from pathlib import Path

from memlab.lab import pre_save_hook

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file
c.FileContentsManager.pre_save_hook = pre_save_hook
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.LabApp.app_settings_dir = str(Path(__file__).resolve().parent / "settings")
