// The one entry to prom-client's metric classes for every binary, loaded from their own files instead of the
// package index. The index also loads the Pushgateway (node:http, node:https, node:zlib), the cluster aggregator,
// Summary with its t-digest and the default process collectors (with @opentelemetry/api): in a compiled program
// with a registry and three metrics that is 40.3 against 31.0 MiB of idle RSS (docs/performance.md "Idle
// memory"). Same classes, same behaviour, same types (prom-client's own declarations, see lib.d.ts). A binary that
// wants the process collectors imports "prom-client/lib/defaultMetrics.js" itself, so no other binary loads them.
import Counter from "prom-client/lib/counter.js";
import Gauge from "prom-client/lib/gauge.js";
import Histogram from "prom-client/lib/histogram.js";
import Registry from "prom-client/lib/registry.js";

export { Counter, Gauge, Histogram, Registry };
