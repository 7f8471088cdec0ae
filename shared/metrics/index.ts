// The one entry to prom-client for every binary: the four classes the metrics modules use, loaded from their own
// files instead of the package index. The index also loads the Pushgateway (node:http, node:https, node:zlib), the
// cluster aggregator, Summary with its t-digest and the default process collectors, none of which an idle daemon
// needs: in a compiled binary that costs 9 MiB of RSS (docs/performance.md "Idle memory"). Same classes, same
// behaviour, same types (prom-client's own declarations, see lib.d.ts).
import Counter from "prom-client/lib/counter.js";
import Gauge from "prom-client/lib/gauge.js";
import Histogram from "prom-client/lib/histogram.js";
import Registry from "prom-client/lib/registry.js";

export { Counter, Gauge, Histogram, Registry };
