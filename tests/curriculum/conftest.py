"""What the curriculum tests share: ``finished_run``, the small run of ``tests/small_run.py`` trained to the end.

The run tests (``test_run.py``) read its records and resume it; the stage trainers' tests (``test_training.py``)
start from its warm-start model. It is trained once per test session, for whichever of the two files asks first,
and both read the same folder, as they did when they were one module (``test_curriculum.py``).
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory):
    # imported here, not at the top: this file loads for every test of the folder, the verl test too, whose venv
    # has a ``tests`` package of verl's own that hides ``tests.small_run`` (see test_verl_sampler.py)
    from curriculum.training.run import Run
    from tests.small_run import small_config

    config = small_config(tmp_path_factory.mktemp("runs"), "small")
    Run(config, log=lambda message: None).execute()
    return config
