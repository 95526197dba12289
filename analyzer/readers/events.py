"""The typed event structs of the Kineto decode: what one trace event decodes to, and the event groups.

msgspec decodes each event into a ``gc=False`` Struct that lists ONLY the fields the analyzer uses, tagged by phase
(``ph``): complete events become ``Event``, metadata ``Meta``, every other phase (flows, instants …) a field-less
Struct. Unknown keys are skipped in C and big nested args (``Input Dims`` …) stay ``Raw``. A batch whose values have
unexpected types is decoded again with the ``Lenient*`` structs (analyzer.readers.batches).
"""

from __future__ import annotations

import math
from typing import Any, Union

import msgspec
from msgspec import Raw

NAN = math.nan

# Event groups, by category. Legacy (PyTorch ≤ 1.10) categories are Capitalised; matched case-insensitively.
KERNEL, MEMCPY, MEMSET, CPU_OP, LAUNCH, ANNOTATION, GPU_ANNOTATION = range(1, 8)
GROUP_OF_CATEGORY = {
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "memset": MEMSET,
    "cpu_op": CPU_OP,
    "operator": CPU_OP,  # legacy
    "cuda_runtime": LAUNCH,
    "cuda_driver": LAUNCH,
    "runtime": LAUNCH,  # legacy
    "user_annotation": ANNOTATION,
    "gpu_user_annotation": GPU_ANNOTATION,
}
GPU_KIND = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}
LEGACY_CATEGORIES = frozenset({"Kernel", "Operator", "Runtime", "Memcpy", "Memset"})


# ---------------------------------------------------------------------------------------------------- structs
class Args(msgspec.Struct, frozen=True, gc=False):
    # Numbers are typed `int | str | None` / `float | str | None`: real traces hold "bytes": "1" (ROCm
    # hipMemcpyWithStream) or null; those go through the slow coercion for that column only, not the whole batch.
    external_id: int | str | None = msgspec.field(name="External id", default=-1)
    external_id_legacy: int | str | None = msgspec.field(name="external id", default=-1)  # legacy GPU/runtime rows
    correlation: int | str | None = -1
    device: int | str | None = -1
    stream: int | str | None = -1
    grid: Raw = Raw()
    block: Raw = Raw()
    registers: float | str | None = msgspec.field(name="registers per thread", default=NAN)
    shared_memory: float | str | None = msgspec.field(name="shared memory", default=NAN)
    nbytes: float | str | None = msgspec.field(name="bytes", default=NAN)
    input_dims: Raw = msgspec.field(name="Input Dims", default=Raw())
    input_types: Raw = msgspec.field(name="Input type", default=Raw())
    input_strides: Raw = msgspec.field(name="Input Strides", default=Raw())
    concrete_inputs: Raw = msgspec.field(name="Concrete Inputs", default=Raw())
    sequence_number: int | str | None = msgspec.field(name="Sequence number", default=-1)
    label: Raw = msgspec.field(name="name", default=Raw())  # metadata events: process_name / thread_name


NO_ARGS = Args()


class Event(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """A complete ('X') event: every op, kernel, memcpy, launch and annotation Kineto writes is one."""

    cat: str | None = ""
    name: str | None = ""
    pid: int | str | None = -1  # legacy: "25738"; GPU rows "stream 7"; the profiler span "Spans"
    tid: int | str | None = -1
    ts: float | str | None = NAN
    dur: float | str | None = NAN
    args: Args = NO_ARGS


class Meta(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    """A metadata event (process_name / thread_name …)."""

    name: str | None = ""
    args: Args = NO_ARGS


# Every other Chrome-trace phase decodes to a field-less Struct: flows ('s'/'f', ~30% of a Kineto trace),
# instants, counters … are parsed and skipped in C (measured: the batch decode takes 17% less time than with
# one Struct type for all phases). A phase not listed here sends its batch to the lenient path.
_PHASES = [
    "B",
    "E",
    "i",
    "I",
    "C",
    "b",
    "n",
    "e",
    "s",
    "t",
    "f",
    "P",
    "O",
    "N",
    "D",
    "R",
    "(",
    ")",
    "V",
    "v",
    "c",
    "T",
    "p",
    "S",
    "F",
]
SKIP_TYPES = tuple(msgspec.defstruct(f"Phase_{ord(ph)}", [], tag_field="ph", tag=ph, gc=False) for ph in _PHASES)
_ANY_EVENT = Union[(Event, Meta, *SKIP_TYPES)]  # noqa: UP007 (a runtime tuple of types)


class LenientArgs(msgspec.Struct, gc=False):
    external_id: Any = msgspec.field(name="External id", default=None)
    external_id_legacy: Any = msgspec.field(name="external id", default=None)
    correlation: Any = None
    device: Any = None
    stream: Any = None
    grid: Raw = Raw()
    block: Raw = Raw()
    registers: Any = msgspec.field(name="registers per thread", default=None)
    shared_memory: Any = msgspec.field(name="shared memory", default=None)
    nbytes: Any = msgspec.field(name="bytes", default=None)
    input_dims: Raw = msgspec.field(name="Input Dims", default=Raw())
    input_types: Raw = msgspec.field(name="Input type", default=Raw())
    input_strides: Raw = msgspec.field(name="Input Strides", default=Raw())
    concrete_inputs: Raw = msgspec.field(name="Concrete Inputs", default=Raw())
    sequence_number: Any = msgspec.field(name="Sequence number", default=None)
    label: Raw = msgspec.field(name="name", default=Raw())


class LenientEvent(msgspec.Struct, gc=False):
    ph: Any = ""
    cat: Any = ""
    name: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Raw = Raw()  # decoded separately: it may not even be an object


class ObjectForm(msgspec.Struct, gc=False):
    """Top level of the usual trace file. Only the keys we show are listed; the rest are skipped in C."""

    schemaVersion: Any = None
    deviceProperties: Any = None
    computeProperties: Any = None  # legacy name of deviceProperties
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    displayTimeUnit: Any = None
    traceName: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    cupti_version: Any = None
    hip_runtime_version: Any = None
    hip_driver_version: Any = None
    roctracer_version: Any = None
    record_shapes: Any = None
    with_stack: Any = None
    trace_id: Any = None


EVENT_LIST = msgspec.json.Decoder(list[_ANY_EVENT])
LENIENT_LIST = msgspec.json.Decoder(list[LenientEvent])
LENIENT_ARGS = msgspec.json.Decoder(LenientArgs)
RAW_LIST = msgspec.json.Decoder(list[Raw])
