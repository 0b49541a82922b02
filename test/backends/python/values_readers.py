"""Read what rankscope wrote with the readers users have, and say what each value became.

Every number is printed as [type, repr] (Python's own view: `int` or `float`, and its exact repr),
so the test sees what a Python user gets, big integers and -0.0 included, without going through
JavaScript's doubles.

  values_readers.py jsonl FILE          json.loads of each line
  values_readers.py store DB            sqlite3: points, samples and config of metrics.db
  values_readers.py tensorboard DIR     TensorBoard's EventAccumulator (scalars) and event file
                                        loader (histograms, as its histograms plugin gets them)
  values_readers.py wandb FILE          the W&B SDK's protobufs for a .wandb file, json.loads of
                                        each value_json (as wandb-core's own reader hands them on)
  values_readers.py rebin FILE          numpy.histogram of each {"values", "bins"} in a JSON list:
                                        the counts W&B's users (and wandb.Histogram) get from those
                                        values and bin edges ([left, right), the last bin closed)
"""
import json
import sqlite3
import sys


def typed(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return ["int", repr(v)]
    if isinstance(v, float):
        return ["float", repr(v)]
    if isinstance(v, list):
        return [typed(x) for x in v]
    if isinstance(v, dict):
        return {k: typed(x) for k, x in v.items()}
    return repr(v)


def read_jsonl(path):
    return [typed(json.loads(line)) for line in open(path, encoding="utf8") if line.strip()]


def read_store(path):
    db = sqlite3.connect(path)
    keys = dict(db.execute("SELECT id, key FROM keys"))
    points = [[keys[k], step, typed(v)] for k, step, v in db.execute("SELECT key_id, step, value FROM points ORDER BY key_id, step")]
    samples = [[keys[k], step, typed(json.loads(text))] for k, step, text in db.execute("SELECT key_id, step, records FROM samples")]
    config = {name: typed(json.loads(text)) for name, text in db.execute("SELECT name, value FROM config")}
    return {"points": points, "samples": samples, "config": config}


def read_tensorboard(logdir):
    import glob
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(logdir, size_guidance={"scalars": 0})
    acc.Reload()
    scalars = {tag: [[e.step, typed(e.value)] for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    histograms = {}
    for path in sorted(glob.glob(f"{logdir}/events.out.tfevents.*")):
        # TensorBoard's own loader: it migrates HistogramProto values (data_compat) into the
        # [left, right, count] tensors its histograms plugin draws.
        for event in event_file_loader.EventFileLoader(path).Load():
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name != "histograms":
                    continue
                buckets = tensor_util.make_ndarray(value.tensor).tolist()
                histograms.setdefault(value.tag, []).append([event.step, typed(buckets)])
    return {"scalars": scalars, "histograms": histograms}


def read_wandb(path):
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "wandb", "python"))
    from read_wandb_log import records  # the framing reader the W&B tests share
    from wandb.proto import wandb_internal_pb2

    def item_key(item):
        return item.key or "/".join(item.nested_key)

    out = {"history": [], "summary": {}, "config": {}}
    for raw in records(open(path, "rb").read()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            out["history"].append({item_key(i): [i.value_json, typed(json.loads(i.value_json))] for i in record.history.item})
        elif kind == "summary":
            out["summary"].update({item_key(i): [i.value_json, typed(json.loads(i.value_json))] for i in record.summary.update})
        elif kind == "config":
            out["config"].update({item_key(i): [i.value_json, typed(json.loads(i.value_json))] for i in record.config.update})
    return out


def rebin(path):
    import numpy

    return [numpy.histogram(numpy.array(h["values"], dtype=float), bins=numpy.array(h["bins"], dtype=float))[0].tolist() for h in json.load(open(path))]


READERS = {"jsonl": read_jsonl, "store": read_store, "tensorboard": read_tensorboard, "wandb": read_wandb, "rebin": rebin}
print(json.dumps(READERS[sys.argv[1]](sys.argv[2])))
