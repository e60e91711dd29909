"""The kernel's correctness: its trials, each audited, and the audit's ruling (the kernel
phase's checks). A `Checker` holds the buffers lent to the kernel's process and the audit
records of its forwards; the timing phase checks its timed runs through it too."""

from __future__ import annotations

import secrets
from typing import Any, Callable, NoReturn, Optional

from .. import audit_rules, messages
from ..compare import DEFAULT_MODE, all_finite, compare_outputs, merge_tolerance
from ..device import sync
from ..loading import copy_into, reference_forward
from ..protocol import KernelFailure
from ..tensors import flatten_outputs
from ..wire import OracleRecord
from .context import Run
from .inputs import signed_draw
from .oracles import Oracles
from .outputs import Frozen, freeze
from .task import Setup


def trial_label(kind: str, index: int) -> str:
    """How a comparison is named where an oracle measured on it is cited."""
    return {"random": "trial %d" % (index + 1), "signed": "the signed-input trial",
            "audit": "the audited forward", "post_timing": "the re-check"}.get(kind, kind)


class Checker:
    """The kernel's trials (see the module). `inputs`/`slots`: the buffers lent to it."""

    def __init__(self, run: Run, setup: Setup, oracles: Oracles, inputs: Any, slots: Any) -> None:
        self.run = run
        self.setup = setup
        self.oracles = oracles
        self.inputs = inputs
        self.slots = slots
        self.audit_records: list[tuple[str, Any, bool]] = []

    def forward(self, mode: str, run: Optional[int] = None, nonce: Optional[int] = None) -> messages.Done:
        request = messages.Forward(op="forward", mode=mode)
        if run is not None:
            request["run"] = run
        if nonce is not None:
            request["nonce"] = nonce
        done: messages.Done = self.run.link.call(request, "done")
        return done

    def check(self, kind: str, index: int, draw: Callable[[], Any], needs: Optional[Callable[[Any], bool]] = None,
              provenance: bool = False, family: str = "random") -> Optional[messages.Done]:
        """One correctness trial, audited. `draw()` makes the judge's private inputs; they go
        into the lent buffers first (the reference may change its inputs in place), then the
        reference runs on the private copy, which is dropped before the worker runs: at the
        peak the judge holds the lent buffers, the reference's outputs and its frozen copy of
        the kernel's. `needs(ref_out)` may decline the trial (returns None then).

        Every correctness forward runs under the audit, so no forward can be told apart as
        the audited one. In each, the values the judge compares are tied to the ones the
        audit labelled by their digest (a nonce per forward seeds it: outputs written by
        anything else after the forward returned are a `crash`), no output element may come
        from a writer the audit did not see, and the kernel's Triton code must run (the same
        kernels in every forward, checked in audit()). Who computed each element is ruled on
        the signed-input forward (`provenance`): on the task's own inputs an honest kernel
        can look like a copy (a ReLU of non-negative inputs is one). `family` names the
        draw's distribution (`random`: the task's get_inputs(), `signed`): the float64 oracle
        is measured on the first comparison of each (compare.py, oracle.py). Returns the
        answer."""
        private = draw()
        copy_into(self.inputs, private)
        sync(self.run.device)
        pending = self.oracles.prepare(family, trial_label(kind, index), private) if self.oracles.due(family) else None
        ref_out = reference_forward(self.setup.ref, private, self.run.device)
        private = None
        self.run.meter.sample()
        if needs is not None and not needs(ref_out):
            return None
        nonce = secrets.randbelow(1 << 31)
        request = messages.Forward(op="forward", mode="audit", nonce=nonce)
        # The oracle's moments are the judge's own work on its own memory: where they may be
        # held that long, measured while the kernel's process runs its forward (the first one
        # compiles the kernel).
        beside = pending is not None and self.oracles.beside_forward(pending)
        if beside:
            self.run.link.send(request)
        compared_with = self.oracles.of(family, pending, ref_out)
        done: messages.Done = self.run.link.receive("done") if beside else self.run.link.call(request, "done")
        outputs = freeze(done, self.slots)
        self.run.meter.sample()
        record: Any = done.get("audit")
        verdict = audit_rules.classify(record, self.run.gpu)
        if verdict.get("verdict") == "malformed":
            raise KernelFailure("crash", "the kernel's process sent an unusable audit record: %s"
                                % verdict.get("summary", "malformed"), details=verdict)
        self.match_audit(record, outputs, nonce)
        self.compare_frozen(kind, index, ref_out, outputs, oracle=compared_with)
        self.audit_records.append((kind, record, provenance))
        if verdict.get("verdict") != "ok" and (provenance or audit_rules.unseen_outputs(record)
                                              or not record["triton_launches"]):
            self.refuse(verdict)
        return done

    def ruled_record(self) -> Any:
        """The audit record of the last forward ruled on for provenance."""
        return [record for _, record, provenance in self.audit_records if provenance][-1]

    def same_kernels_everywhere(self, ruled: Any) -> None:
        """Every audited forward launched the Triton kernels of the forward ruled on (by name;
        counts may differ: autotuning benchmarks its configs in the first one)."""
        expected = sorted({x["name"] for x in ruled["launches"]})
        for kind, record, _ in self.audit_records:
            ran = sorted({x["name"] for x in record["launches"]})
            if ran != expected:
                label = {"random": "a correctness trial", "post_timing": "the re-check after timing"}.get(kind, kind)
                raise KernelFailure(
                    "torch_fallback", "the audited forwards ran different Triton kernels: %s ran %s, the "
                    "signed-input trial %s: every forward must compute with the same Triton code"
                    % (label, ", ".join(ran) or "none", ", ".join(expected) or "none"),
                    details={"kernels": expected, "differing": ran, "kind": kind})

    def match_audit(self, record: Any, outputs: Frozen, nonce: int) -> None:
        """The frozen values must be the ones the audit saw: each output's digest, seeded by
        this forward's nonce, against the one in the (schema-checked) audit record."""
        from ..audit import MAX_OUTPUTS
        from ..digest import tensor_digest

        import torch

        seen = {o["path"]: o.get("digest") for o in record["outputs"]}
        for path, value in flatten_outputs(outputs.values):
            if not isinstance(value, torch.Tensor) or value.device.type == "meta":
                continue
            if path not in seen:
                raise KernelFailure("crash", "the audit record has no entry for output %s%s" % (
                    path, " (the audit records at most %d outputs)" % MAX_OUTPUTS
                    if len(record["outputs"]) >= MAX_OUTPUTS else ""))
            if seen[path] != tensor_digest(value, nonce):
                raise KernelFailure(
                    "crash", "output %s is not what the audited forward returned: something wrote the "
                    "judge's output buffer after the forward (another thread or process of the kernel's)" % path,
                    details={"output": path})

    def compare_frozen(self, kind: str, index: int, ref_out: Any, outputs: Frozen, record: bool = True,
                       forward: Optional[tuple[int, int]] = None, oracle: Any = None) -> None:
        """Compares the frozen outputs; then checks that the slots still hold what was frozen:
        a kernel that writes its outputs after saying "done" is a `crash` whatever the
        comparison said (on a GPU such a write would move work out of the timed window)."""
        try:
            self.compare(kind, index, ref_out, outputs.values, record, forward, oracle)
        except KernelFailure:
            outputs.check_unchanged()
            raise
        outputs.check_unchanged()

    def refuse(self, verdict: dict[str, Any]) -> NoReturn:
        self.run.result["audit"] = verdict
        if verdict.get("verdict") == "torch_fallback":
            raise KernelFailure("torch_fallback", verdict.get("summary", "PyTorch did the work"), details=verdict)
        raise KernelFailure("crash", "the kernel's process sent an unusable audit record: %s"
                            % verdict.get("summary", "malformed"), details=verdict)

    def compare(self, kind: str, index: int, ref_out: Any, new_out: Any, record: bool = True,
                forward: Optional[tuple[int, int]] = None, oracle: Any = None) -> None:
        """One comparison, recorded as a trial (`record`, or whenever it fails); `forward`
        is (k, count) for the k-th of a timed window's forwards; `oracle` the float64
        oracle of its inputs (else the latest of the task's own draws, compare.py)."""
        settings = self.run.settings
        if oracle is None:
            oracle = self.oracles.reused("random")
        passed, outputs, reason, tolerance = compare_outputs(
            ref_out, new_out, settings.atol, settings.rtol, settings.tolerance or DEFAULT_MODE, self.run.policy, oracle)
        merged = dict(merge_tolerance(self.run.result.get("tolerance"), tolerance))
        if merged.get("oracle") is not None:
            merged["oracle"] = OracleRecord(dict(merged["oracle"], seconds=self.oracles.seconds))
            self.run.result["phases_s"]["oracle"] = self.oracles.seconds  # within correctness
        self.run.result["tolerance"] = merged
        if not passed and (self.run.result.get("precision") or {}).get("reduced"):
            # A mismatch of a kernel that computes below the task's precision: say so with it.
            reason = "%s; %s (precision policy %s)" % (reason, self.run.result["precision"]["statement"], self.run.policy)
        if record or not passed:
            self.run.result["trials"].append({"kind": kind, "index": index, "passed": passed, "outputs": outputs})
        if not passed:
            which = "" if forward is None else ", forward %d of the %d in its window" % (forward[0] + 1, forward[1])
            label = {"random": "trial %d" % (index + 1), "signed": "signed-input trial",
                     "audit": "audited forward",
                     "timed": "timed run %d%s (its outputs as the forward's stream left them, checked against "
                              "the reference)" % (index + 1, which),
                     "post_timing": "re-check after timing (fresh values in the timing buffers)"}[kind]
            raise KernelFailure("mismatch", "%s: %s" % (label, reason), "%s: %s" % (label, reason),
                                {"trial": index, "kind": kind, "reason": reason, "outputs": outputs})

    def correctness(self) -> None:
        """The random trials, then the signed-input trial (on the task's [0, 1) inputs an
        honest ReLU equals its input, which says nothing about who computed it); every one
        audited."""
        settings = self.run.settings
        self.audit_records = []
        for t in range(settings.trials):
            self.run.progress("correctness trial %d/%d" % (t + 1, settings.trials))
            self.check("random", t, lambda: self.setup.source.draw(self.run.seed + 1 + t))
        if settings.signed_trial:
            self.run.progress("signed-input trial")
            done = self.check("signed", settings.trials, signed_draw(self.setup, self.run.seed + 1000), needs=all_finite,
                              provenance=True, family="signed")
            if done is None:
                self.run.result["notes"].append("signed-input trial skipped: the reference is not finite on signed inputs")

    def audit(self) -> None:
        """The audit's verdict in the result, from the forward that rules on provenance (the
        signed-input trial; else one more audited forward, on signed inputs where the
        reference allows them), on a GPU with each class's share of GPU time from one more
        forward; and the same Triton kernels must have run in every audited forward (a
        kernel that computes with PyTorch in some forwards and with Triton in others ran
        different code)."""
        if not any(provenance for _, _, provenance in self.audit_records):
            self.run.progress("audit of one forward")
            done = self.check("audit", self.run.settings.trials + 2, signed_draw(self.setup, self.run.seed + 500), needs=all_finite,
                              provenance=True, family="signed")
            if done is None:
                self.check("audit", self.run.settings.trials + 2, lambda: self.setup.source.draw(self.run.seed + 502),
                           provenance=True)
        record = dict(self.ruled_record())
        self.same_kernels_everywhere(record)
        self.run.clock.mark("audit")
        if self.run.gpu and isinstance(record, dict):
            # GPU time in its own forward on fresh values: a memoizing kernel would answer a
            # repeat of the audited inputs from its cache.
            copy_into(self.inputs, self.setup.source.draw(self.run.seed + 600))
            sync(self.run.device)
            record["gpu"] = self.forward("gpu_time").get("gpu")
            self.run.meter.sample()
        verdict = audit_rules.classify(record, self.run.gpu)
        if isinstance(verdict.get("details"), dict):
            verdict["details"]["audited_forwards"] = len(self.audit_records)
        self.run.result["audit"] = verdict
        if verdict.get("verdict") != "ok":
            self.refuse(verdict)

    def check_timed(self, i: int, run: Any, privates: list[Any], slot_sets: list[Any]) -> None:
        """A checked timed run: each set's slots as the judge's stream copied them right
        after the window closed, against the reference on the judge's own copy of that set's
        inputs (one trial recorded per run, every set compared)."""
        count = len(slot_sets)
        for k, (private, slots, taken) in enumerate(zip(privates, slot_sets, run.snapshot)):
            outputs = freeze(run.done, slots, taken)
            ref_out = reference_forward(self.setup.ref, private, self.run.device)
            self.run.meter.sample()
            self.compare_frozen("timed", i, ref_out, outputs, record=k == count - 1,
                                forward=(k, count) if count > 1 else None)
