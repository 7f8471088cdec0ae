// The Reflect metadata polyfill @peculiar/x509's tsyringe requires, as an ES module of our own, for bundles: see
// index.ts for why it is imported both this way and directly.
import "reflect-metadata";
