// ESLint (flat config) for the page's ES modules: no globals but the browser's, lines of at most 120.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["aiayn/web/static/**/*.js"],
    languageOptions: {ecmaVersion: 2022, sourceType: "module", globals: {...globals.browser}},
    rules: {
      "max-len": ["error", {code: 120, ignoreStrings: false, ignoreTemplateLiterals: false}],
      "no-implicit-globals": "error",
      "no-var": "error",
      "prefer-const": "error",
    },
  },
];
