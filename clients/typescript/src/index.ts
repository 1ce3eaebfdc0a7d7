export * from "./client.js";
export * from "./errors.js";
export * from "./worker.js";
export * from "./waiting.js";
