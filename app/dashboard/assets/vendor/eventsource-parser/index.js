export { ParseError } from './errors.js';
export { createParser } from './parse.js';
//# sourceMappingURL=index.js.map