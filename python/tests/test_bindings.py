"""The binding against the public header: every field of every bound struct is
bound (a field added to the header and not to src/bindings.cpp fails here; one
renamed or retyped fails the build), every status has its exception class."""
import os
import re

import numpy as np
import pytest

import gradcomm
from gradcomm import _gradcomm as _C

INCLUDE = os.environ.get("GRADCOMM_INCLUDE_DIR",
                         os.path.join(os.path.dirname(__file__), "..", "..", "include", "gradcomm"))

# Header struct -> binding class. The config header (size, magic, version) is
# filled by the binding from the ..._INITIALIZER macros and not exposed.
BOUND = {
    "gcommDevice": "Device", "gcommTensor": "Tensor", "gcommCommConfig": "CommConfig",
    "gcommReducerConfig": "ReducerConfig", "gcommReducerStats": "ReducerStats",
    "gcommReducerStepTiming": "ReducerStepTiming",
    "gcommBucketAutotuneReport": "BucketAutotuneReport",
    "gcommStragglerReport": "StragglerReport",
    "gcommNonFiniteReport": "NonFiniteReport",
    "gcommMembershipStats": "MembershipStats", "gcommMembershipView": "MembershipView",
    "gcommShardPiece": "ShardPiece", "gcommGradScalerConfig": "GradScalerConfig",
    "gcommGradScalerState": "GradScalerState", "gcommAllocatorConfig": "AllocatorConfig",
    "gcommAllocatorStat": "AllocatorStat", "gcommAllocatorStats": "AllocatorStats",
}
NOT_BOUND = {"gcommLogConfig": "a callback pointer: gradcomm.set_log_level covers the level",
             "gcommMembershipConfig": "three strings: membership_join takes one argument per field (checked below)",
             "gcommOuterSyncConfig": "a string: outer_sync_create takes one argument per field (checked below)",
             "gcommOuterSyncStats": "outer_sync_stats returns its counters as a dict named as its fields (checked below)"}
CONFIG_HEADER = ["size", "magic", "version"]


def header_structs():
    structs = {}
    for name in sorted(os.listdir(INCLUDE)):
        text = open(os.path.join(INCLUDE, name)).read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", text, flags=re.S):
            fields = []
            for decl in m.group(2).split(";"):
                decl = decl.strip()
                if decl:
                    fields.append(re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", decl)[0])
            structs[m.group(1)] = fields
    return structs


def test_the_header_parses():
    structs = header_structs()
    assert structs["gcommReducerConfig"][:4] == ["size", "magic", "version", "bucket_cap_bytes"]
    assert "scaler" in structs["gcommReducerConfig"]


def compression_structs():
    """The config and stats structs the gcommCompression_t enum names: compression is
    enabled by its text form and its statistics come back as JSON
    (gcommReducerEnableCompressionText, gcommReducerDescribeCompression), so no
    binding names a strategy and a new one needs none."""
    text = open(os.path.join(INCLUDE, "reducer.h")).read()
    enum = re.search(r"typedef\s+enum\s+gcommCompression\s*\{(.*?)\}", text, flags=re.S).group(1)
    return set(re.findall(r"(gcomm\w+)_t\b", enum))


def test_every_header_struct_is_bound_or_listed_as_not_bound():
    assert {"gcommPowerSgdConfig", "gcommInt8Stats"} <= compression_structs()
    unknown = set(header_structs()) - set(BOUND) - set(NOT_BOUND) - compression_structs()
    assert not unknown, f"structs in the header without a binding: {sorted(unknown)} (bind them in src/bindings.cpp)"


def test_outer_sync_takes_every_config_field_and_names_every_stat():
    fields = header_structs()["gcommOuterSyncConfig"][3:]
    signature = _C.outer_sync_create.__doc__ or ""
    missing = [f for f in fields if f"{f}:" not in signature and f"{f}=" not in signature]
    assert not missing, f"outer_sync_create lacks {missing}: {signature}"
    stats = header_structs()["gcommOuterSyncStats"][3:]
    comm = gradcomm.init_local(1, timeout=10)[0]
    x = np.ones(8, dtype=np.float32)
    h = _C.outer_sync_create(comm.handle, [(x.__array_interface__["data"][0], 8, _C.DataType.Float32)], 2, 1, 0.7,
                             0.9, 1, -1, None, 1 << 20)
    try:
        assert sorted(_C.outer_sync_stats(h)) == sorted(stats)
    finally:
        _C.outer_sync_destroy(h)
        comm.close()


def test_membership_join_takes_every_config_field():
    fields = [f for f in header_structs()["gcommMembershipConfig"][3:] if not f.startswith("reserved")]
    signature = _C.membership_join.__doc__ or ""
    missing = [f for f in fields if f"{f}:" not in signature and f"{f}=" not in signature]
    assert not missing, f"membership_join lacks {missing}: {signature}"


@pytest.mark.parametrize("struct", sorted(BOUND))
def test_bound_fields_equal_the_header(struct):
    fields = header_structs()[struct]
    if fields[:3] == CONFIG_HEADER:
        fields = fields[3:]
    bound = getattr(_C, BOUND[struct]).__fields__
    assert sorted(bound) == sorted(fields), f"{struct}: header {fields}, binding {list(bound)}"


def test_config_defaults_come_from_the_initializers():
    assert _C.ReducerConfig().bucket_cap_bytes == 25 << 20
    assert _C.GradScalerConfig().init_scale == 65536.0
    assert _C.CommConfig().rank == -1 and _C.CommConfig().master_addr is None


def test_every_status_has_an_exception_class():
    for status in _C.Status:
        if status == _C.Status.Success:
            continue
        exc = gradcomm.errors.from_status(int(status), _C.status_name(int(status)), "why")
        assert type(exc) is not gradcomm.Error, f"{status} maps to the base class"
        assert isinstance(exc, gradcomm.Error) and exc.status == _C.status_name(int(status))


def test_a_failed_call_raises_with_the_status_and_the_library_message():
    with pytest.raises(gradcomm.InvalidArgumentError) as e:
        gradcomm.GradScaler(growth_interval=0)
    assert e.value.status == "gcommInvalidArgument"
    assert "growth_interval" in e.value.message
    assert isinstance(e.value, ValueError)


def test_version_matches_the_header():
    assert gradcomm.__version__ == "0.1.0"
    assert _C.version() == _C.VERSION_CODE
