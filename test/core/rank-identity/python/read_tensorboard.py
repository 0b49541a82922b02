"""Read every TensorBoard run under each log directory given with TensorBoard's own reader.

Prints one JSON list, an object per log directory in the order given: {run: {tag: [[step, value],
...]}}, the run named as TensorBoard names it (its directory relative to the log directory, "." for
the log directory itself). Used by the identity tests to check each recorder's run with the
official reader; one process reads every log directory of a job (importing TensorBoard is most of
its time).
"""
import json
import sys

from tensorboard.backend.event_processing import event_multiplexer


def read(logdir):
    multiplexer = event_multiplexer.EventMultiplexer(size_guidance={"scalars": 0, "tensors": 0})
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    out = {}
    for run, tags in multiplexer.Runs().items():
        series = {}
        for tag in tags.get("tensors", []):
            events = multiplexer.Tensors(run, tag)
            values = []
            for e in events:
                array = e.tensor_proto
                if array.float_val:
                    values.append([e.step, float(array.float_val[0])])
                elif array.double_val:
                    values.append([e.step, float(array.double_val[0])])
            if values:
                series[tag] = values
        for tag in tags.get("scalars", []):
            series[tag] = [[e.step, e.value] for e in multiplexer.Scalars(run, tag)]
        out[run] = series
    return out


print(json.dumps([read(logdir) for logdir in sys.argv[1:]]))
