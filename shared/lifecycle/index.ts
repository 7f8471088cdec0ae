export { Shutdown, type CloseFn, type ShutdownOptions, type ShutdownSignal, type SignalSource } from "./shutdown.ts";
export { runMain, type MainSpec, type RunContext } from "./main.ts";
export { LoopRunner, PeriodicLoop } from "./loop.ts";
