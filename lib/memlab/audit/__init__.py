"""``experiment=audit``: one model under test, every method that needs no knowledge of its training data, each
finding shown beside that method's error rates measured on the tiny ground-truth zoo (:mod:`memlab.audit.ground_truth`).
The study is :func:`memlab.audit.study.audit`; its settings are conf/experiment/audit.yaml."""
