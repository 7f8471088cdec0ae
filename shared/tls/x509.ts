// The one entry to @peculiar/x509. Its dependency injection (tsyringe) needs a Reflect metadata polyfill loaded
// before the library itself; importing it from here guarantees that order for every module and test.
import "reflect-metadata";
export * from "@peculiar/x509";
