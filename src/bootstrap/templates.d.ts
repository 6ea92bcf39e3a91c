// Bootstrap templates are embedded as text at bundle time: `import t from "./x.tmpl" with { type: "text" }`.
declare module "*.tmpl" {
  const text: string;
  export default text;
}
