/**
 * Typed errors, rebuilt from the wire form of the Python engine's `EngineError.to_wire()`
 * (`{type, code, message, ...}`; src/tackroom/engine/errors.py).
 */

export type WireError = { type?: string; code?: string; message?: string; [field: string]: unknown };

/** Base of every error the SDK raises about the bus; `code` is the engine's stable code. */
export class EngineError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }

  toWire(): WireError {
    return { type: this.wireType(), code: this.code, message: this.message };
  }

  protected wireType(): string {
    return "EngineError";
  }
}

/** Nobody serves the function (NATS answered "no responders"). */
export class FunctionNotFoundError extends EngineError {
  constructor(
    readonly functionId: string,
    readonly suggestions: string[] = [],
  ) {
    const hint = suggestions.length ? `; did you mean ${suggestions.join(", ")}?` : "";
    super("function_not_found", `no worker serves function '${functionId}'${hint}`);
  }

  override toWire(): WireError {
    return { ...super.toWire(), function_id: this.functionId, suggestions: this.suggestions };
  }

  protected override wireType(): string {
    return "FunctionNotFound";
  }
}

/** The function did not answer within `timeoutSeconds`. */
export class InvocationTimeoutError extends EngineError {
  constructor(
    readonly functionId: string,
    readonly timeoutSeconds: number,
  ) {
    super("invocation_timeout", `function '${functionId}' did not answer within ${timeoutSeconds}s`);
  }

  override toWire(): WireError {
    return { ...super.toWire(), function_id: this.functionId, timeout: this.timeoutSeconds };
  }

  protected override wireType(): string {
    return "InvocationTimeout";
  }
}

/** The remote handler failed; `remoteCode` is the code it chose (`internal` for a plain throw). */
export class InvocationError extends EngineError {
  constructor(
    readonly functionId: string,
    readonly remoteCode: string,
    message: string,
  ) {
    super("invocation_error", message);
  }

  override toString(): string {
    return `${this.functionId}: [${this.remoteCode}] ${this.message}`;
  }

  override toWire(): WireError {
    return { ...super.toWire(), function_id: this.functionId, remote_code: this.remoteCode };
  }

  protected override wireType(): string {
    return "InvocationError";
  }
}

/** A compare-and-set write found another revision than the one it expected (0: absent). */
export class RevisionConflictError extends EngineError {
  constructor(
    readonly scope: string,
    readonly key: string,
    readonly expected: number,
    readonly actual: number,
  ) {
    super(
      "revision_conflict",
      `state ${scope}/${key}: expected revision ${expected}, found ${actual}${actual === 0 ? " (absent)" : ""}`,
    );
  }

  protected override wireType(): string {
    return "RevisionConflict";
  }
}

/**
 * Throw it from a handler to fail with a code of your own: the caller gets an
 * `InvocationError` with this code as `remote_code` (like the Python `FunctionError`).
 */
export class FunctionError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "FunctionError";
  }
}

export function errorFromWire(wire: WireError): EngineError {
  const message = String(wire.message ?? "");
  switch (wire.type) {
    case "FunctionNotFound":
      return new FunctionNotFoundError(String(wire.function_id), (wire.suggestions as string[]) ?? []);
    case "InvocationTimeout":
      return new InvocationTimeoutError(String(wire.function_id), Number(wire.timeout));
    case "InvocationError":
      return new InvocationError(String(wire.function_id), String(wire.remote_code), message);
    case "RevisionConflict":
      return new RevisionConflictError(
        String(wire.scope),
        String(wire.key),
        Number(wire.expected),
        Number(wire.actual),
      );
    default:
      return new EngineError(String(wire.code ?? "engine_error"), message);
  }
}

/** The `(code, message)` a caller sees for a handler's failure, as the Python engine reports it. */
export function describeFailure(error: unknown): [string, string] {
  if (error instanceof FunctionError) return [error.code, error.message];
  if (error instanceof EngineError) return [error.code, `${error.name.replace(/Error$/, "")}: ${error.message}`];
  if (error instanceof Error) return ["internal", `${error.name}: ${error.message}`];
  return ["internal", String(error)];
}
