"""Prints every scalar of the TensorBoard event files in a directory as
JSON, {tag: [[step, value], ...]}, read with tensorboard's own reader (which
checks each record's length and CRC-32C checksums)."""

import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

accumulator = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
accumulator.Reload()
print(json.dumps({
    tag: [[event.step, event.value] for event in accumulator.Scalars(tag)]
    for tag in accumulator.Tags()["scalars"]
}))
