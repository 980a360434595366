import { Module } from "@nestjs/common";
import { Pool } from "pg";

import { config } from "./config";
import { CONFIG, JobsController, POOL } from "./jobs.controller";

const settings = config();

@Module({
  controllers: [JobsController],
  providers: [
    { provide: CONFIG, useValue: settings },
    { provide: POOL, useValue: new Pool({ connectionString: settings.databaseUrl, max: 10 }) },
  ],
})
export class AppModule {}
