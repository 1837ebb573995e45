"""The session's options as plain data (``Options``, built by ``options.session_options`` from the command line and
the ini keys), with the defaults the session owns: which GPU, where the baselines are. Light on purpose: the plugin
builds them in every session, before it knows whether the session holds a perf test.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpuperf.measure.measurement import DEFAULT_MIN_SAMPLE_S, DEFAULT_WARMUP_CALLS, DEFAULT_WARMUP_TIME_S
from gpuperf.measure.stats import StoppingRule
from gpuperf.verdict.gate_config import GateConfig, Policy
from gpuperf.vocabulary import Flush

MISSING_POLICIES = ("skip", "fail", "pass")
UNRELIABLE_POLICIES = ("skip", "fail", "pass")
#: ``--gpu``: the first device; it exists whenever there is a GPU, so checking it costs no device query.
DEFAULT_GPUS = "0"
#: The ``gpuperf_baselines`` ini key: the folder of ``<gpu-slug>.yaml`` files under the rootdir.
DEFAULT_BASELINES_DIR = "baselines"


@dataclass(frozen=True)
class Options:
    gate: GateConfig = field(default_factory=GateConfig)
    rule: StoppingRule = field(default_factory=StoppingRule)
    update: bool = False
    missing: str = Policy.missing
    on_unreliable: str = Policy.on_unreliable
    baseline_dir: Path = Path(DEFAULT_BASELINES_DIR)
    flush_modes: tuple[str, ...] = (Flush.COLD,)
    gpus: str = DEFAULT_GPUS
    warmup_calls: int = DEFAULT_WARMUP_CALLS
    warmup_time_s: float = DEFAULT_WARMUP_TIME_S
    min_sample_s: float = DEFAULT_MIN_SAMPLE_S
    results_dir: Path | None = Path("results")
    fail_on_version_change: bool = False
    gate_mode: bool = False  # --gate or $CI: every baselined case must be measured, stale entries fail
    allow_stale: bool = False
    dry_run: bool = False  # --dry-run: the tests run on stand-ins of the GPU (``dry_run.py``), nothing launched

    @property
    def policy(self) -> Policy:
        return Policy(on_unreliable=self.on_unreliable, missing=self.missing, strict=self.gate.strict)
