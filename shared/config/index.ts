// Flags and environment through zod, Go durations, Kubernetes quantities, and the two startup errors.
export { UsageError, StartupError, isUsageError, isStartupError } from "./errors.ts";
export { parseQuantity, QuantityError, type Quantity, type QuantityFormat } from "./quantity.ts";
export { parseGoDuration, formatGoDuration, nanosToMillis, DurationError } from "./duration.ts";
export {
  boolFlag,
  durationFlag,
  floatFlag,
  intFlag,
  isSemver,
  listFlag,
  parseGoBool,
  parseGoFloat,
  parseGoInt,
  quantityFlag,
  semverFlag,
  stringFlag,
  toDurationValue,
  type DurationValue,
  type FlagSpec,
  type FlagType,
} from "./flag-kinds.ts";
export {
  invalidFlag,
  mapOutcome,
  parseFlags,
  type CliOutcome,
  type Env,
  type FlagTable,
  type FlagValues,
  type ParsedFlags,
  type ValueSource,
} from "./flags.ts";
export { formatHelp, type EnvOnlySetting, type HelpDoc } from "./help.ts";
export { splitHostPort, listenPort, listenAddressCheck, addressHost, type HostPort } from "./host-port.ts";
export { OPERATOR_LOG_LEVEL_ENV, operatorLogLevelHelp, kubeconfigHelp, sandboxdTokenFlags, inventoryStaleAfterFlag, inventoryTrustedNetworksFlag, e2bFlags, e2bOptionsFrom, publicTrafficFlags, publicTrafficFrom, type PublicTrafficOptions, checkE2bOptions, dnsLabelProblem, E2B_DEFAULT_ENVD_VERSION, E2B_DEFAULT_TIMEOUT_SECONDS, type E2bOptions } from "./common-flags.ts";
export { cidrProblem } from "./cidr.ts";
