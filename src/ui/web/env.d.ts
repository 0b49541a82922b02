// Vite bundles CSS imported from TypeScript; the type checker only needs to know the import exists.
declare module "*.css";
