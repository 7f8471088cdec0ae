// The relay's entry to the HTTP/1.1 framing parser, which lives in shared/framing (the secure front follows its
// internal server's responses with it too, shared/secure-front/keep-alive.ts).
export * from "../../framing/index.ts";
