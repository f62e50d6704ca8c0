"""The reviewer report: one static site that puts every paper number beside ours (``make report``).

    python -m memlab.site [--results results] [--out results/report]

Builds ``<out>/index.html`` from the default run of every experiment (``results/<exp>/default/``):

* a summary of every claim (``tables/comparison.csv`` of each run, see :mod:`memlab.comparison`), coloured by
  verdict, naming the paper by title; each row opens the rule's text and the paper's sentence when the table has
  them. An experiment without a comparison table shows one "no claims yet" row; one that has not run, "no run yet";
* one section per experiment: sanity checks, figures with their captions (``figures/captions.json``), links to
  every table as a page (the CSV kept as a download), its sweeps (``results/<exp>/sweeps/``), its executed notebook;
* a page per run (``<exp>/run.html``): its provenance from ``run.json``, flagged when it was not made at this
  checkout's commit from a clean tree, its ``config.yaml``, every table inline;
* a page per paper of our departures from its setup (``conf/deviations/<paper>.yaml``);
* an environment section: the checkout (dirty only beyond ``dvc.lock``, naming what differs), the builder's
  packages, the data and model hashes of ``dvc.lock``.

The folder opens from ``file://`` with no server, no JavaScript, no external fonts. It is packed as
``<out>-<short commit>.tar.gz`` beside it (earlier builds' archives are removed, so there is one).

Modules: :mod:`.data` reads run folders, :mod:`.markup` holds HTML helpers, :mod:`.pages` the index and run pages,
:mod:`.provenance` each run's run.json, :mod:`.deviations` and :mod:`.sweep_pages` their pages, :mod:`.build` the
folder and archive.
"""

from memlab.site.build import build, main, pack

__all__ = ["build", "main", "pack"]
