"""The envelope between kforge and the server (envelope.py): each request kforge sends parses
into its record, anything else is refused naming what is wrong, and each event is the JSON
object kforge reads."""

from __future__ import annotations

import pytest

from kforge_harness import envelope
from kforge_harness.wire import WireError


def test_each_request_kforge_sends_parses_into_its_record() -> None:
    assert envelope.parse_request({"op": "eval", "id": "e1", "job": {"device": "cpu"}}) == \
        envelope.Eval("e1", {"device": "cpu"})
    assert envelope.parse_request({"op": "cancel", "id": "e1"}) == envelope.Cancel("e1")
    assert envelope.parse_request({"op": "device_peaks", "id": "p1", "cache_dir": "/c/peaks"}) == \
        envelope.DevicePeaks("p1", "/c/peaks")
    assert envelope.parse_request({"op": "device_info", "id": "d1"}) == envelope.DeviceInfo("d1")
    assert envelope.parse_request({"op": "ncu_check", "id": "n1"}) == envelope.NcuCheck("n1")
    assert envelope.parse_request({"op": "shutdown"}) == envelope.Shutdown()
    assert envelope.parse_request({"op": "shutdown", "id": "x"}) == envelope.Shutdown(), "an id is ignored"
    assert envelope.parse_request({"op": "rescore", "id": "r1", "timing": {"score": 2.0}, "compiled": None,
                                   "choice": "compile"}) == envelope.Rescore("r1", {"score": 2.0}, None, "compile")
    check = envelope.parse_request({"op": "static_check", "id": "s1", "source": "x = 1", "reject_torch_ops": True})
    assert check == envelope.StaticCheck("s1", "x = 1", True)


@pytest.mark.parametrize("line, says", [
    ({"op": "evaluate", "id": "e1"}, "unknown op 'evaluate'"),
    ({"id": "e1"}, "unknown op None"),
    (["eval"], "a request is a JSON object"),
    ({"op": "eval", "id": "e1", "job": "not an object"}, "eval.job is a str"),
    ({"op": "static_check", "id": "s1", "source": 3}, "static_check.source is a int"),
    ({"op": "static_check", "id": "s1", "reject_torch_ops": "yes"}, "static_check.reject_torch_ops is a str"),
])
def test_anything_else_is_refused_naming_what_is_wrong(line: object, says: str) -> None:
    with pytest.raises(WireError, match=says):
        envelope.parse_request(line)


def test_the_events_are_the_objects_kforge_reads() -> None:
    assert envelope.Progress("e1", "loading task").message() == {"event": "progress", "id": "e1",
                                                                 "phase": "loading task"}
    assert envelope.Result("e1", {"status": "correct"}).message() == {"event": "result", "id": "e1",
                                                                     "result": {"status": "correct"}}
    assert envelope.Started("e1", "fork", "bwrap").message() == {"event": "started", "id": "e1",
                                                                "executor": "fork", "sandbox": "bwrap"}
    assert envelope.Info("d1", "device_info", {"devices": []}).message() == {
        "event": "device_info", "id": "d1", "info": {"devices": []}}
    assert envelope.Static("s1", None, {"errors": []}).message() == {"event": "static", "id": "s1",
                                                                    "category": None, "report": {"errors": []}}
    assert envelope.Error(None, "malformed request line").message() == {"event": "error",
                                                                         "error": "malformed request line"}
    assert envelope.Error("e1", "boom", "Traceback").message() == {"event": "error", "id": "e1", "error": "boom",
                                                                   "traceback": "Traceback"}


def test_the_schema_lists_every_op_and_event_with_its_fields() -> None:
    schema = envelope.schema()
    assert sorted(schema["ops"]) == sorted(["eval", "cancel", "static_check", "device_info", "sandbox_info",
                                            "ncu_check", "device_peaks", "rescore", "shutdown"])
    assert schema["ops"]["eval"] == {"id": "string", "job": "object"}
    assert schema["ops"]["device_peaks"] == {"id": "string", "cache_dir": "string"}
    assert schema["ops"]["static_check"] == {"id": "string", "source": "string", "reject_torch_ops": "boolean"}
    assert schema["ops"]["shutdown"] == {}
    assert sorted(schema["events"]) == sorted(["progress", "started", "result", "static", "rescored", "error",
                                               "device_info", "sandbox_info", "ncu_check", "device_peaks"])
    assert schema["ops"]["rescore"] == {"id": "string", "timing": "object", "compiled": "object", "choice": "string"}
    assert schema["events"]["rescored"] == {"id": "string", "timing": "object"}
    assert schema["events"]["error"] == {"id": "string", "error": "string", "traceback": "string"}
    assert schema["events"]["started"] == {"id": "string", "executor": "string", "sandbox": "string"}
    # A query's answer is under the query's op, without the record's `kind`.
    assert schema["events"]["ncu_check"] == {"id": "string", "info": "object"}


def test_each_field_on_the_wire_is_in_the_schema() -> None:
    """What message() writes and what parse_request reads are the fields schema() lists."""
    schema = envelope.schema()
    written = [envelope.Progress("e1", "p"), envelope.Started("e1", "fork", "bwrap"), envelope.Result("e1", {}),
               envelope.Static("s1", "static_check", {}), envelope.Error("e1", "boom", "Traceback"),
               envelope.Info("d1", "device_info", {}), envelope.Rescored("r1", {})]
    for event in written:
        message = event.message()
        assert set(message) - {"event"} == set(schema["events"][message["event"]]), message
