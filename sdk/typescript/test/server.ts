/** A real nats-server with JetStream on a free port, for the tests (`$NATS_SERVER` names the binary). */

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, connect as tcpConnect } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

function binary(): string {
  if (process.env.NATS_SERVER) return process.env.NATS_SERVER;
  const beside = resolve(import.meta.dirname, "../../../../.venv/bin/nats-server"); // dist/test → repo
  return existsSync(beside) ? beside : "nats-server";
}

async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => done(typeof address === "object" && address ? address.port : 0));
    });
  });
}

function answers(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = tcpConnect(port, "127.0.0.1");
    socket.once("data", (data) => {
      socket.destroy();
      done(data.toString().startsWith("INFO"));
    });
    socket.once("error", () => done(false));
  });
}

export interface TestServer {
  url: string;
  stop(): Promise<void>;
}

export async function startNatsServer(): Promise<TestServer> {
  const port = await freePort();
  const store = mkdtempSync(join(tmpdir(), "tackroom-ts-nats-"));
  const child: ChildProcess = spawn(binary(), ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", store], {
    stdio: "ignore",
  });
  const deadline = Date.now() + 10_000;
  while (!(await answers(port))) {
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill();
      throw new Error(`nats-server did not start on port ${port}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    stop: async () => {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
      rmSync(store, { recursive: true, force: true });
    },
  };
}
