// `import text from "../../proto/x.proto" with { type: "text" }` embeds a schema at bundle time.
declare module "*.proto" {
  const text: string;
  export default text;
}
