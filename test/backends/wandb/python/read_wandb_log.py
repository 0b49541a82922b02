"""Read a .wandb transaction log with the official W&B SDK's protobufs; print its records as JSON.

The framing is checked as wandb-core's reader (core/pkg/leveldb/record.go) checks it: the 7-byte
W&B header, 32 KiB blocks, chunk CRC-32 over type + data, chunk types, zero padding. Every record is
parsed with wandb.proto.wandb_internal_pb2.Record (the SDK's generated class) and re-emitted with
protobuf's own JSON printer; item values (value_json) are decoded with Python's json, which reads
NaN/Infinity/-Infinity, and emitted as {"$nonFinite": "..."} so they survive strict JSON.
"""
import json
import math
import struct
import sys
import zlib

from google.protobuf import json_format
from wandb.proto import wandb_internal_pb2

BLOCK = 32 * 1024


def records(data):
    if data[:4] != b":W&B" or struct.unpack("<H", data[4:6])[0] != 0xBEE1 or data[6] != 0:
        raise SystemExit("bad W&B header")
    pos, pending = 7, None
    while pos < len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            if data[pos:pos + left] != b"\0" * left:
                raise SystemExit(f"non-zero padding at {pos}")
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        body = data[pos + 7:pos + 7 + length]
        if 7 + length > left or len(body) != length:
            raise SystemExit(f"chunk at {pos} runs past its block or the file")
        if zlib.crc32(bytes([kind]) + body) != crc:
            raise SystemExit(f"CRC mismatch at {pos}")
        pos += 7 + length
        if kind == 1:
            if pending is not None:
                raise SystemExit("full chunk inside a record")
            yield body
        elif kind == 2:
            pending = body
        elif kind == 3:
            pending += body
        elif kind == 4:
            yield pending + body
            pending = None
        else:
            raise SystemExit(f"bad chunk type {kind} at {pos}")


def safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return {"$nonFinite": "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")}
    if isinstance(v, list):
        return [safe(x) for x in v]
    if isinstance(v, dict):
        return {k: safe(x) for k, x in v.items()}
    return v


def main():
    out = []
    for raw in records(open(sys.argv[1], "rb").read()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        message = json_format.MessageToDict(record, preserving_proto_field_name=True)
        for kind, field in (("history", "item"), ("summary", "update"), ("config", "update")):
            for it in message.get(kind, {}).get(field, []):
                it["value"] = safe(json.loads(it.pop("value_json")))
        for it in message.get("run", {}).get("config", {}).get("update", []):
            it["value"] = safe(json.loads(it.pop("value_json")))
        out.append(message)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
