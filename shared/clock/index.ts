// shared/clock — the one Clock (wall and monotonic time, one-shot and periodic timers, abortable sleep): `realClock`
// in production, `FakeClock` in tests. Everything that waits or stamps time takes a Clock instead of calling
// Date.now / setTimeout itself.
export { type Clock, RealClock, realClock, sleepOn, type Timer } from "./clock.ts";
export { FAKE_CLOCK_START, FakeClock, settle } from "./fake.ts";
