/** A monitored Mongoose connection to a given URI (the shared helper always uses the test backend's). */
import mongoose from 'mongoose';
import type { MonitoredConnection } from '../../support/db';

export async function connectTo(uri: string, dbName: string, options: mongoose.ConnectOptions = {}): Promise<MonitoredConnection> {
  const connection = mongoose.createConnection(uri, { dbName, monitorCommands: true, maxPoolSize: 20, ...options });
  await connection.asPromise();
  const commands: string[] = [];
  connection.getClient().on('commandStarted', (event) => commands.push(event.commandName));
  return {
    connection,
    commands,
    resetCommands: () => {
      commands.length = 0;
    },
    close: () => connection.close(),
  };
}
