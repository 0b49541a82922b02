/**
 * The protobuf messages a tfevents file holds, as protobufjs types.
 *
 * Field names and numbers are TensorBoard's own (`tensorboard/compat/proto/event.proto`,
 * `summary.proto`, `histogram.proto`, `tensor.proto`, `tensor_shape.proto`, the text plugin's
 * `plugin_data.proto`, the hparams plugin's `plugin_data.proto` and `google/protobuf/struct.proto`),
 * restricted to the fields rankscope writes and the ones `rankscope import tensorboard` reads
 * (`src/import/tensorboard.ts`: tensors' other value fields and packed content, the hparams
 * plugin's other messages). They are given as a JSON descriptor so only protobufjs's light build
 * (no .proto parser) is loaded.
 */
import protobuf from "protobufjs/light.js";

const packed = { packed: true };

const descriptor = {
  nested: {
    tensorboard: {
      nested: {
        Event: {
          oneofs: { what: { oneof: ["file_version", "summary", "session_log"] } },
          fields: {
            wall_time: { type: "double", id: 1 },
            step: { type: "int64", id: 2 },
            file_version: { type: "string", id: 3 },
            summary: { type: "Summary", id: 5 },
            session_log: { type: "SessionLog", id: 7 },
          },
        },
        SessionLog: {
          fields: {
            status: { type: "SessionStatus", id: 1 },
            checkpoint_path: { type: "string", id: 2 },
            msg: { type: "string", id: 3 },
          },
          nested: { SessionStatus: { values: { STATUS_UNSPECIFIED: 0, START: 1, STOP: 2, CHECKPOINT: 3 } } },
        },
        SummaryMetadata: {
          fields: {
            plugin_data: { type: "PluginData", id: 1 },
            display_name: { type: "string", id: 2 },
            summary_description: { type: "string", id: 3 },
            data_class: { type: "int32", id: 4 },
          },
          nested: {
            PluginData: { fields: { plugin_name: { type: "string", id: 1 }, content: { type: "bytes", id: 2 } } },
          },
        },
        Summary: {
          fields: { value: { rule: "repeated", type: "Value", id: 1 } },
          nested: {
            Value: {
              oneofs: { value: { oneof: ["simple_value", "histo", "tensor"] } },
              fields: {
                tag: { type: "string", id: 1 },
                simple_value: { type: "float", id: 2 },
                histo: { type: "HistogramProto", id: 5 },
                tensor: { type: "TensorProto", id: 8 },
                metadata: { type: "SummaryMetadata", id: 9 },
              },
            },
          },
        },
        HistogramProto: {
          fields: {
            min: { type: "double", id: 1 },
            max: { type: "double", id: 2 },
            num: { type: "double", id: 3 },
            sum: { type: "double", id: 4 },
            sum_squares: { type: "double", id: 5 },
            bucket_limit: { rule: "repeated", type: "double", id: 6, options: packed },
            bucket: { rule: "repeated", type: "double", id: 7, options: packed },
          },
        },
        TensorShapeProto: {
          fields: { dim: { rule: "repeated", type: "Dim", id: 2 } },
          nested: { Dim: { fields: { size: { type: "int64", id: 1 }, name: { type: "string", id: 2 } } } },
        },
        TensorProto: {
          fields: {
            dtype: { type: "int32", id: 1 },
            tensor_shape: { type: "TensorShapeProto", id: 2 },
            tensor_content: { type: "bytes", id: 4 },
            float_val: { rule: "repeated", type: "float", id: 5, options: packed },
            double_val: { rule: "repeated", type: "double", id: 6, options: packed },
            int_val: { rule: "repeated", type: "int32", id: 7, options: packed },
            string_val: { rule: "repeated", type: "bytes", id: 8 },
            int64_val: { rule: "repeated", type: "int64", id: 10, options: packed },
            bool_val: { rule: "repeated", type: "bool", id: 11, options: packed },
            half_val: { rule: "repeated", type: "int32", id: 13, options: packed },
          },
        },
        TextPluginData: { fields: { version: { type: "int32", id: 1 } } },
        hparams: {
          nested: {
            HParamsPluginData: {
              oneofs: { data: { oneof: ["session_start_info"] } },
              fields: {
                version: { type: "int32", id: 1 },
                session_start_info: { type: "SessionStartInfo", id: 3 },
              },
            },
            SessionStartInfo: {
              fields: {
                hparams: { keyType: "string", type: "google.protobuf.Value", id: 1 },
                model_uri: { type: "string", id: 2 },
                monitor_url: { type: "string", id: 3 },
                group_name: { type: "string", id: 4 },
                start_time_secs: { type: "double", id: 5 },
              },
            },
          },
        },
      },
    },
    google: {
      nested: {
        protobuf: {
          nested: {
            Value: {
              oneofs: { kind: { oneof: ["number_value", "string_value", "bool_value"] } },
              fields: {
                number_value: { type: "double", id: 2 },
                string_value: { type: "string", id: 3 },
                bool_value: { type: "bool", id: 4 },
              },
            },
          },
        },
      },
    },
  },
};

const root = protobuf.Root.fromJSON(descriptor);

/** `tensorboard.Event`: one record of a tfevents file. */
export const EventType = root.lookupType("tensorboard.Event");
/** `tensorboard.hparams.HParamsPluginData`: the hparams plugin's content. */
export const HParamsPluginDataType = root.lookupType("tensorboard.hparams.HParamsPluginData");

/** `DataType` values of `tensor.proto`'s dtype used here. */
export const DT_FLOAT = 1;
export const DT_DOUBLE = 2;
export const DT_INT32 = 3;
export const DT_STRING = 7;
export const DT_INT64 = 9;
export const DT_BOOL = 10;
export const DT_HALF = 19;
/** `SessionLog.SessionStatus.START`. */
export const SESSION_START = 1;
/** The version every event file starts with. */
export const FILE_VERSION = "brain.Event:2";
