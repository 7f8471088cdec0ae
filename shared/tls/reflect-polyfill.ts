// The Reflect metadata polyfill @peculiar/x509's tsyringe requires, as an ES module of our own: Bun's bundler starts
// a lazily loaded module's ES imports before its CommonJS ones, so x509.ts imports this (ESM, ordered) rather than
// the CommonJS package directly.
import "reflect-metadata";
