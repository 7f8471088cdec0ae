// Types of the prom-client files index.ts loads one by one: the package declares only its index, whose classes
// these files are (prom-client 15: index.js re-exports each module.exports unchanged).
declare module "prom-client/lib/counter.js" {
  import { Counter } from "prom-client";
  export default Counter;
}
declare module "prom-client/lib/gauge.js" {
  import { Gauge } from "prom-client";
  export default Gauge;
}
declare module "prom-client/lib/histogram.js" {
  import { Histogram } from "prom-client";
  export default Histogram;
}
declare module "prom-client/lib/registry.js" {
  import { Registry } from "prom-client";
  export default Registry;
}
declare module "prom-client/lib/defaultMetrics.js" {
  import { collectDefaultMetrics } from "prom-client";
  export default collectDefaultMetrics;
}
