/**
 * `tsc -p <project>` through a compiler's JavaScript API, type-checking only the project's own
 * files and the declaration files whose path contains a marker (the package under test); every
 * other declaration file (Node's, Mongoose's, the driver's) is read and its types resolved as
 * needed, but not checked itself. For packed-app.ts `checkOnly`: at a compiler's defaults
 * (no skipLibCheck) what matters is whether an error comes from the package's declarations, and
 * checking Node's and Mongoose's own declarations dominated the time.
 *
 * The diagnostics are those `tsc` reports for those files: the config's and the options', the
 * global ones, and each selected file's syntactic and semantic ones (what tsc's
 * emitFilesAndReportErrors gathers, file by file), printed as `tsc --pretty false` prints them.
 *
 *   node --import tsx check-declarations.ts <compiler package dir> <project> <marker>   (cwd: the project's)
 * Exit status 0 without a diagnostic, 2 with some (as tsc).
 */
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import type * as TypeScript from 'typescript';

const [pkgDir, project, marker] = process.argv.slice(2);
if (!pkgDir || !project || !marker) throw new Error('usage: check-declarations.ts <compiler package dir> <project> <marker>');
// The compiler under test (typescript, typescript6, ...), not the one this repository compiles with.
const ts = createRequire(__filename)(join(pkgDir, 'lib', 'typescript.js')) as typeof TypeScript;

const host: TypeScript.ParseConfigFileHost = {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
    throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
  },
};
const config = ts.getParsedCommandLineOfConfigFile(resolve(project), {}, host)!;
const program = ts.createProgram({ rootNames: config.fileNames, options: config.options, configFileParsingDiagnostics: ts.getConfigFileParsingDiagnostics(config) });
const own = new Set(config.fileNames.map((file) => resolve(file)));
const checked = program.getSourceFiles().filter((file) => own.has(resolve(file.fileName)) || file.fileName.includes(marker));
const diagnostics = [
  ...program.getConfigFileParsingDiagnostics(),
  ...program.getOptionsDiagnostics(),
  ...program.getGlobalDiagnostics(),
  ...checked.flatMap((file) => [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]),
];
const format: TypeScript.FormatDiagnosticsHost = { getCanonicalFileName: (file) => file, getCurrentDirectory: () => process.cwd(), getNewLine: () => '\n' };
process.stdout.write(ts.formatDiagnostics(diagnostics, format));
process.stderr.write(`checked ${checked.length} of ${program.getSourceFiles().length} files with TypeScript ${ts.version}\n`);
process.exitCode = diagnostics.length > 0 ? 2 : 0;
