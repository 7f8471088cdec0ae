// shared/clock — time. The one Clock (wall and monotonic time, one-shot and periodic timers, abortable sleep): `realClock`
// in production, `FakeClock` in tests. Everything that waits or stamps time takes a Clock instead of calling
// Date.now / setTimeout itself. And time as Go writes it on the wire (go-time.ts): the one RFC 3339 parser, with
// one convention (null = Go's zero time, undefined = not a time), and the encodings we write.
export { type Clock, RealClock, realClock, sleepOn, type Timer } from "./clock.ts";
export { FAKE_CLOCK_START, FakeClock, settle } from "./fake.ts";
export { floorToSecond, formatMicroTime, formatRfc3339Nano, formatRfc3339Seconds, GO_ZERO_TIME, parseGoTime } from "./go-time.ts";
