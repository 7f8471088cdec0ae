// The one entry to @peculiar/x509, as the namespace `x509` (`import { x509 } from ".../x509.ts"`). Its dependency
// injection (tsyringe) needs a Reflect metadata polyfill loaded before the library itself; importing it from here
// guarantees that order for every module and test, also when ca.ts loads this module lazily (reflect-polyfill.ts).
import "./reflect-polyfill.ts";
import * as x509 from "@peculiar/x509";

// Pin the WebCrypto provider explicitly instead of relying on the library sniffing globals at import time.
x509.cryptoProvider.set(crypto);

export { x509 };
