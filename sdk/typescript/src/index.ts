export {
  connect,
  Worker,
  DEFAULT_TIMEOUT_MS,
  type CallContext,
  type ConnectOptions,
  type FunctionOptions,
  type Handler,
  type JsonSchema,
  type Registration,
  type StateEntry,
  type StateOptions,
  type TriggerOptions,
} from "./worker.js";
export {
  EngineError,
  FunctionError,
  FunctionNotFoundError,
  InvocationError,
  InvocationTimeoutError,
  RevisionConflictError,
} from "./errors.js";
export { EventSubscription, type StreamRecord } from "./events.js";
export { decodeToken, encodeToken, Names, parseEngineUrl } from "./naming.js";
export {
  formatTraceparent,
  parseTraceparent,
  type FinishedSpan,
  type SpanContext,
  type TraceContext,
} from "./tracing.js";
