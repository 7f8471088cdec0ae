// The one entry to @peculiar/x509, as the namespace `x509` (`import { x509 } from "#shared/x509/index.ts"`). Its own
// folder, apart from shared/tls, so only what parses or verifies certificates evaluates it (the library with asn1js,
// tsyringe and reflect-metadata costs a compiled binary ~5 MiB of idle RSS; docs/performance.md "Idle memory").
// Its dependency injection (tsyringe) throws unless a Reflect metadata polyfill was loaded before the library
// itself, and shared/tls/ca.ts loads this module lazily. The polyfill is therefore imported twice over: Bun's runtime evaluates the CommonJS
// imports first (reflect-metadata, then the library's CommonJS build), while Bun's bundler starts a lazily loaded
// module's ES imports first (reflect-polyfill.ts, then the library's ES build). Either way it comes first.
import "./reflect-polyfill.ts";
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

// Pin the WebCrypto provider explicitly instead of relying on the library sniffing globals at import time.
x509.cryptoProvider.set(crypto);

export { x509 };
